"""What the site's algorithm pages say that the scripts cannot say about themselves.

Everything else on a page (the idea, the notes, the flags, the results, the exercises, the
papers, the source) is read from the script, results.json and exercises.py when the site is
built (docs/gen_pages.py). What is written here is held to the scripts by tests/test_site.py:

- `equations`: (docstring line, LaTeX). The line is quoted under the rendered equation and
  must stand, word for word, in the script's module docstring: change an equation in the
  script and the test names the page to change with it.
- `loop`: the pseudocode, (what the step does, where the code does it). The place is a
  top-level name (`compute_gae`), a method (`Agent.update`), or `function:Heading`, the
  one-line sub-heading comment `# Heading: ...` inside that function (`train:Rollout`). The
  build links each step to that line of the source and fails where the name is gone.
- `road`: where the script sits on the road, what it adds to the one before it.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Algorithm:
    title: str
    road: str
    equations: list = field(default_factory=list)
    loop: list = field(default_factory=list)


# The order a course walks them (the learning path and the navigation).
ORDER = ["qlearning", "dqn", "vpg", "trpo", "ppo", "ppo_masked", "ppod", "ppo_lstm", "ppo_rnd",
         "ddpg_td3", "sac", "crossq", "es", "impala", "mappo", "matd3"]

PPO_CLIP = r"L^{\text{clip}} = \mathbb{E}_t\left[\min\left(\rho_t A_t,\ \operatorname{clip}(\rho_t, 1-\epsilon, 1+\epsilon)\, A_t\right)\right]"
GAE_DELTA = r"\delta_t = r_t + \gamma\,(1 - \text{terminated}_t)\, V(s_{t+1}) - V(s_t)"
GAE_A = r"A_t = \delta_t + \gamma\lambda\,(1 - \text{done}_t)\, A_{t+1}"

ALGORITHMS = {
    "qlearning": Algorithm(
        title="Tabular Q-learning",
        road="The start of the road: a table of action values, one number per state and "
             "action, moved towards a one-step bootstrapped target. Every later script keeps "
             "this target and replaces the table.",
        equations=[
            ("target   = r + gamma * (1 - terminated) * max_a' Q(s', a')",
             r"y = r + \gamma\,(1 - \text{terminated})\,\max_{a'} Q(s', a')"),
            ("delta    = target - Q(s, a)                       (the TD error)",
             r"\delta = y - Q(s, a)"),
            ("Q(s, a) <- Q(s, a) + alpha * delta",
             r"Q(s, a) \leftarrow Q(s, a) + \alpha\,\delta"),
            ("cell_i = clip(floor((x_i - low_i) / (high_i - low_i) * bins_i), 0, bins_i - 1)",
             r"\text{cell}_i = \operatorname{clip}\left(\left\lfloor \frac{x_i - \text{low}_i}{\text{high}_i - \text{low}_i}\, \text{bins}_i \right\rfloor, 0, \text{bins}_i - 1\right)"),
        ],
        loop=[
            ("map the observation to a row of the table (a grid cell for a Box)", "discretize"),
            ("act epsilon-greedily on the row", "QTable.act"),
            ("move Q(s, a) a fraction alpha towards the target", "q_update"),
            ("the loop: step, learn, decay epsilon, log", "train:Learn"),
        ]),
    "dqn": Algorithm(
        title="Deep Q-Network (DQN)",
        road="Q-learning with a neural network in place of the table: a replay buffer "
             "decorrelates the data and a target network holds the target still.",
        equations=[
            ("target      y = r + gamma * (1 - terminated) * max_a' Q_target(s', a')",
             r"y = r + \gamma\,(1 - \text{terminated})\,\max_{a'} Q_{\text{target}}(s', a')"),
            ("double DQN  y = r + gamma * (1 - terminated) * Q_target(s', argmax_a' Q(s', a'))",
             r"y = r + \gamma\,(1 - \text{terminated})\, Q_{\text{target}}\big(s', \arg\max_{a'} Q(s', a')\big)"),
            ("loss        L = mean( huber(Q(s, a) - y) )   or   mean( (Q(s, a) - y)^2 )",
             r"L = \operatorname{mean}\,\operatorname{huber}\big(Q(s, a) - y\big) \quad\text{or}\quad \operatorname{mean}\big(Q(s, a) - y\big)^2"),
            ("target net  theta' <- tau * theta + (1 - tau) * theta'   every C steps (tau = 1: copy)",
             r"\theta' \leftarrow \tau\,\theta + (1 - \tau)\,\theta' \quad \text{every } C \text{ steps}"),
            ("epsilon     eps_t = start_e + (end_e - start_e) * min(1, t / (fraction * budget))",
             r"\epsilon_t = \epsilon_{\text{start}} + (\epsilon_{\text{end}} - \epsilon_{\text{start}}) \min\left(1, \frac{t}{\text{fraction}\cdot\text{budget}}\right)"),
        ],
        loop=[
            ("act epsilon-greedily", "train:Act"),
            ("store (s, a, r, s', terminated), s' the true final observation", "ReplayBuffer.add"),
            ("sample a minibatch and compute the targets", "dqn_targets"),
            ("a gradient step on the TD loss", "td_loss"),
            ("move the target network", "soft_update"),
        ]),
    "vpg": Algorithm(
        title="Vanilla policy gradient (REINFORCE)",
        road="The first policy-gradient step: no value table to maximize, the policy itself "
             "is pushed towards the actions that did better than expected.",
        equations=[
            ("J(theta)       = E_tau[ sum_t r_t ]              the objective: an episode's return",
             r"J(\theta) = \mathbb{E}_\tau\Big[\sum_t r_t\Big]"),
            ("reward-to-go     grad J = E[ sum_t grad log pi_theta(a_t|s_t) * sum_{k>=t} r_k ]: an action",
             r"\nabla J = \mathbb{E}\Big[\sum_t \nabla \log \pi_\theta(a_t \mid s_t) \sum_{k \ge t} r_k\Big]"),
            ("the loss         L_pi(theta) = -mean_t[ log pi_theta(a_t|s_t) * A_t ],  A_t = R_t - V(s_t)",
             r"L_\pi(\theta) = -\operatorname{mean}_t\big[\log \pi_\theta(a_t \mid s_t)\, A_t\big], \qquad A_t = R_t - V(s_t)"),
            ("the critic       L_V(phi) = mean_t[ 0.5 * (V_phi(s_t) - R_t)^2 ]  (--gae-lambda: target",
             r"L_V(\phi) = \operatorname{mean}_t\big[\tfrac12 (V_\phi(s_t) - R_t)^2\big]"),
        ],
        loop=[
            ("collect a batch of N*T steps with the current policy", "train:Batch"),
            ("reward-to-go R_t, bootstrapped where the batch cuts an episode", "reward_to_go"),
            ("advantages A_t = R_t - V(s_t) (or GAE)", "RolloutBuffer.advantages"),
            ("one gradient step on the policy loss", "vpg_loss"),
            ("several steps of regression of V on R_t", "value_loss"),
        ]),
    "trpo": Algorithm(
        title="Trust Region Policy Optimization (TRPO)",
        road="VPG's gradient, but the step is the natural gradient scaled to a KL radius, and "
             "a line search keeps it only where the objective improved.",
        equations=[
            ("surrogate    L(theta)  = mean_t[ pi_theta(a_t|s_t) / pi_old(a_t|s_t) * A_t ]",
             r"L(\theta) = \operatorname{mean}_t\left[\frac{\pi_\theta(a_t \mid s_t)}{\pi_{\text{old}}(a_t \mid s_t)}\, A_t\right]"),
            ("trust region KL(theta) = mean_t[ KL(pi_old(.|s_t) || pi_theta(.|s_t)) ]",
             r"\overline{KL}(\theta) = \operatorname{mean}_t\big[KL\big(\pi_{\text{old}}(\cdot \mid s_t)\,\|\,\pi_\theta(\cdot \mid s_t)\big)\big]"),
            ("the problem  maximize L(theta) subject to KL(theta) <= delta",
             r"\max_\theta L(\theta) \quad \text{subject to} \quad \overline{KL}(\theta) \le \delta"),
            ("the step     x = (F + c I)^-1 g by conjugate gradient, c the damping, F v = grad(grad KL . v)",
             r"x = (F + cI)^{-1} g \quad\text{(conjugate gradient)}, \qquad Fv = \nabla\big(\nabla \overline{KL} \cdot v\big)"),
            ("step = sqrt(2 delta / (x^T (F + c I) x)) * x, so 0.5 step^T (F + c I) step = delta",
             r"\text{step} = \sqrt{\frac{2\delta}{x^\top (F + cI)\, x}}\; x"),
        ],
        loop=[
            ("collect a batch with the current policy", "train:Batch"),
            ("GAE advantages and return targets", "compute_gae"),
            ("the policy gradient g of the surrogate", "surrogate"),
            ("x = F^-1 g by conjugate gradient, with Fisher-vector products",
             "conjugate_gradient"),
            ("scale the step to the KL radius", "natural_step"),
            ("backtracking line search on L and KL", "line_search"),
            ("fit the critic by Adam", "train:Value"),
        ]),
    "ppo": Algorithm(
        title="Proximal Policy Optimization (PPO) with GAE",
        road="TRPO's idea (stay close to the policy that collected the data) by a clipped "
             "ratio instead of a constraint: many cheap epochs of minibatch steps on one "
             "rollout.",
        equations=[
            ("ratio_t   = pi_theta(a_t | s_t) / pi_old(a_t | s_t)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid s_t)}{\pi_{\text{old}}(a_t \mid s_t)}"),
            ("L_clip    = E[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]",
             PPO_CLIP),
            ("GAE       delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)",
             GAE_DELTA),
            ("A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}", GAE_A),
            ("loss      = -L_clip + c_v * 0.5 * (V(s_t) - R_t)^2 - c_e * entropy",
             r"\text{loss} = -L^{\text{clip}} + c_v \cdot \tfrac12 \big(V(s_t) - R_t\big)^2 - c_e\, \mathcal{H}\big[\pi_\theta(\cdot \mid s_t)\big]"),
        ],
        loop=[
            ("collect a rollout of T steps from N environments", "train:Rollout"),
            ("GAE advantages and returns (or V-trace)", "compute_gae"),
            ("the rollout's targets, bootstrapped from the true final observation",
             "RolloutBuffer.gae"),
            ("epochs of minibatch steps on the clipped loss", "train:Update"),
            ("the loss: clipped surrogate, value, entropy", "ppo_loss"),
        ]),
    "ppo_masked": Algorithm(
        title="PPO with invalid-action masking",
        road="PPO whose policy gives probability 0 to the actions the environment forbids, "
             "with the same mask stored and re-applied in the update.",
        equations=[
            ("masked logits  l'_t(a) = l_t(a) if m_t(a) = 1, else -1e8",
             r"l'_t(a) = \begin{cases} l_t(a) & m_t(a) = 1 \\ -10^8 & \text{otherwise} \end{cases}"),
            ("policy         pi(a | s_t, m_t) = softmax(l'_t)(a)   (0 for every invalid action)",
             r"\pi(a \mid s_t, m_t) = \operatorname{softmax}(l'_t)(a)"),
            ("entropy        H_t = - sum_{a : m_t(a) = 1} pi(a | s_t, m_t) log pi(a | s_t, m_t)",
             r"\mathcal{H}_t = -\sum_{a:\, m_t(a) = 1} \pi(a \mid s_t, m_t) \log \pi(a \mid s_t, m_t)"),
            ("ratio_t        = pi_theta(a_t | s_t, m_t) / pi_old(a_t | s_t, m_t)    (the same m_t)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid s_t, m_t)}{\pi_{\text{old}}(a_t \mid s_t, m_t)}"),
        ],
        loop=[
            ("read the masks from info or the observation", "read_masks"),
            ("the masked distribution", "masked_categorical"),
            ("collect a rollout, storing each step's mask", "train:Rollout"),
            ("GAE targets", "compute_gae"),
            ("epochs of PPO steps with the stored masks", "train:Update"),
        ]),
    "ppod": Algorithm(
        title="PPO+D: PPO guided by a demonstration",
        road="PPO whose rollouts sometimes replay a stored successful episode, so that a "
             "sparse reward is seen before the policy finds it by itself.",
        equations=[
            ("episode source   reward demo w.p. rho, value demo w.p. phi, real w.p. 1 - rho - phi",
             r"\text{source} \sim \big(\text{reward demo}: \rho,\ \text{value demo}: \phi,\ \text{real}: 1 - \rho - \phi\big)"),
            ("value demos      sampled with p_i = exp(alpha * (m_i - max_j m_j)) / sum_k (same),",
             r"p_i = \frac{\exp\big(\alpha (m_i - \max_j m_j)\big)}{\sum_k \exp\big(\alpha (m_k - \max_j m_j)\big)}"),
            ("phi <- phi - phi_0 / K_v,  rho <- rho + phi_0 / K_v   (phi >= 0)",
             r"\phi \leftarrow \phi - \phi_0 / K_v, \qquad \rho \leftarrow \rho + \phi_0 / K_v"),
            ("ratio_t          = pi_theta(a_t | s_t) / mu(a_t | s_t),  mu = 1 on a demo step (log mu = 0)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid s_t)}{\mu(a_t \mid s_t)}, \qquad \mu = 1 \text{ on a demo step}"),
        ],
        loop=[
            ("choose each new episode's source", "choose_source"),
            ("play or replay one step in each slot", "act_or_replay"),
            ("admit successful episodes to the reward demos", "DemoBuffers.admit"),
            ("GAE over the rollout, replays included", "train:Targets"),
            ("PPO's epochs of minibatch steps", "train:Update"),
            ("re-rank the value demos under the new critic", "value_probabilities"),
        ]),
    "ppo_lstm": Algorithm(
        title="Recurrent PPO (LSTM)",
        road="PPO with memory: the policy carries a hidden state, so minibatches become "
             "sequences re-run from a stored state.",
        equations=[
            ("(h_t, c_t) = LSTM(enc(o_t), (h_{t-1}, c_{t-1})),   (h, c) = 0 where an episode starts",
             r"(h_t, c_t) = \operatorname{LSTM}\big(\operatorname{enc}(o_t), (h_{t-1}, c_{t-1})\big)"),
            ("ratio_t = pi_theta(a_t | h_t) / pi_old(a_t | h_t)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid h_t)}{\pi_{\text{old}}(a_t \mid h_t)}"),
            ("L_clip  = E[ min(ratio_t A_t, clip(ratio_t, 1 - eps, 1 + eps) A_t) ]", PPO_CLIP),
            ("rollout k = 1, 2, ...:  lr_k = lr f_k,  eps_k = eps f_k,  f_k = max(0, 1 - (k - 1) / K),",
             r"\text{lr}_k = \text{lr}\, f_k, \quad \epsilon_k = \epsilon\, f_k, \quad f_k = \max\left(0, 1 - \frac{k-1}{K}\right)"),
        ],
        loop=[
            ("collect a rollout, storing the LSTM state of every step", "train:Rollout"),
            ("GAE advantages and returns", "compute_gae"),
            ("cut each environment's rollout into chunks of L steps", "recurrent_generator"),
            ("re-run the LSTM over a chunk from its stored first state", "unroll"),
            ("PPO's loss on the chunk's outputs", "ppo_loss"),
        ]),
    "ppo_rnd": Algorithm(
        title="PPO with Random Network Distillation (RND)",
        road="PPO with a second, intrinsic reward stream that pays for novelty: the error of a "
             "predictor trained to copy a fixed random network.",
        equations=[
            ("i_t          = (1/k) * sum_j (f_hat_j(x_{t+1}) - f_j(x_{t+1}))^2, the predictor's error",
             r"i_t = \frac1k \sum_j \big(\hat f_j(x_{t+1}) - f_j(x_{t+1})\big)^2"),
            ("R^int_t      = gamma_int * R^int_{t-1} + i_t, a discounted sum run forward, never reset",
             r"R^{\text{int}}_t = \gamma_{\text{int}}\, R^{\text{int}}_{t-1} + i_t"),
            ("r^int_t      = i_t / sigma_R, sigma_R the running std of R^int over all rollouts so far",
             r"r^{\text{int}}_t = i_t / \sigma_R"),
            ("A_t          = c_ext * A^ext_t + c_int * A^int_t",
             r"A_t = c_{\text{ext}}\, A^{\text{ext}}_t + c_{\text{int}}\, A^{\text{int}}_t"),
        ],
        loop=[
            ("collect a rollout with the current policy", "train:Rollout"),
            ("the intrinsic reward: the predictor's error", "intrinsic_reward"),
            ("scale it by the running std of its forward sum", "IntrinsicRewardScaler.__call__"),
            ("GAE of each stream, then the combined advantage", "RolloutBuffer.compute_returns"),
            ("PPO's loss with two value heads", "ppo_loss"),
            ("train the predictor on a fraction of each minibatch", "predictor_loss"),
        ]),
    "ddpg_td3": Algorithm(
        title="DDPG and TD3",
        road="Q-learning for continuous actions: a deterministic actor takes the place of the "
             "max, climbing the critic's gradient; TD3 adds three fixes for overestimation.",
        equations=[
            ("exploration    a  = clip(mu(s) + eps, -1, 1),                 eps ~ N(0, sigma^2)",
             r"a = \operatorname{clip}\big(\mu(s) + \epsilon, -1, 1\big), \qquad \epsilon \sim \mathcal{N}(0, \sigma^2)"),
            ("target action  a' = clip(mu'(s') + clip(eps', -c, c), -1, 1), eps' ~ N(0, sigma'^2)",
             r"a' = \operatorname{clip}\big(\mu'(s') + \operatorname{clip}(\epsilon', -c, c), -1, 1\big)"),
            ("critic target  y  = r + gamma * (1 - terminated) * min(Q'_1(s', a'), Q'_2(s', a'))",
             r"y = r + \gamma\,(1 - \text{terminated}) \min\big(Q'_1(s', a'), Q'_2(s', a')\big)"),
            ("actor loss     L_mu = -mean over the batch of Q_1(s, mu(s)),   every d-th critic step",
             r"L_\mu = -\operatorname{mean}\, Q_1\big(s, \mu(s)\big)"),
            ("target update  theta' <- tau * theta + (1 - tau) * theta',     with every actor step",
             r"\theta' \leftarrow \tau\,\theta + (1 - \tau)\,\theta'"),
        ],
        loop=[
            ("act with Gaussian noise", "noisy_action"),
            ("store the transition, s' the true final observation", "ReplayBuffer.add"),
            ("sample a batch; the critic target", "td3_target"),
            ("critic steps, and every d-th an actor step and the target update", "update"),
            ("the soft target update", "soft_update"),
        ]),
    "sac": Algorithm(
        title="Soft Actor-Critic (SAC)",
        road="TD3's twin critics with a stochastic actor that maximizes return plus entropy, "
             "and a temperature learned to hold the entropy near a target.",
        equations=[
            ("actor          u ~ N(mu(s), sigma(s)^2),   a = tanh(u)",
             r"u \sim \mathcal{N}\big(\mu(s), \sigma(s)^2\big), \qquad a = \tanh(u)"),
            ("critic target  y = r + gamma (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s')),",
             r"y = r + \gamma\,(1 - \text{terminated})\Big(\min_j Q'_j(s', a') - \alpha \log \pi(a' \mid s')\Big)"),
            ("actor loss     L_pi = mean over s of alpha log pi(a~|s) - min_j Q_j(s, a~),  a~ ~ pi(.|s)",
             r"L_\pi = \operatorname{mean}_s\Big[\alpha \log \pi(\tilde a \mid s) - \min_j Q_j(s, \tilde a)\Big]"),
            ("temperature    L_alpha = -mean of alpha (log pi(a~|s) + H_target),   H_target = -dim(A)",
             r"L_\alpha = -\operatorname{mean}\Big[\alpha\big(\log \pi(\tilde a \mid s) + \mathcal{H}_{\text{target}}\big)\Big]"),
            ("log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))     (stable form)",
             r"\log\big(1 - \tanh(u)^2\big) = 2\big(\log 2 - u - \operatorname{softplus}(-2u)\big)"),
        ],
        loop=[
            ("act with a sample of the policy", "train:Act"),
            ("store the transition", "ReplayBuffer.add"),
            ("the soft critic target", "sac_target"),
            ("critic, actor and temperature steps", "Agent.update"),
            ("log pi of a squashed Gaussian", "squashed_logprob"),
        ]),
    "crossq": Algorithm(
        title="CrossQ",
        road="SAC without target networks: batch renormalization in the critics and one joint "
             "forward pass of (s, a) and (s', a').",
        equations=[
            ("batch renorm   y = gamma_bn ((x - mu_B) / sigma_B * r + d) + beta_bn,   per feature,",
             r"y = \gamma_{bn}\left(\frac{x - \mu_B}{\sigma_B}\, r + d\right) + \beta_{bn}"),
            ("joint pass     [Q_j(s, a); Q_j(s', a')] = Q_j([s; s'], [a; a']) on the batch of 2B in",
             r"\big[Q_j(s, a);\, Q_j(s', a')\big] = Q_j\big([s; s'], [a; a']\big)"),
            ("critic target  y = r + gamma (1 - terminated) (min_j sg[Q_j(s', a')] - alpha log pi(a'|s')),",
             r"y = r + \gamma\,(1 - \text{terminated})\Big(\min_j \operatorname{sg}\big[Q_j(s', a')\big] - \alpha \log \pi(a' \mid s')\Big)"),
        ],
        loop=[
            ("act with a sample of the policy", "train:Act"),
            ("the joint pass of current and next pairs", "joint_pass"),
            ("the critic target, from the critics themselves", "crossq_target"),
            ("batch renormalization in each layer", "BatchRenorm.forward"),
            ("critic, actor and temperature steps", "Agent.update"),
        ]),
    "es": Algorithm(
        title="Evolution strategies (OpenAI ES)",
        road="No gradient of the return at all: perturb the parameters, play, and move towards "
             "the perturbations that did better. It parallelizes by sharing only seeds.",
        equations=[
            ("eps_i ~ N(0, I)                       with --antithetic, pairs eps_{2j} = -eps_{2j+1}",
             r"\epsilon_i \sim \mathcal{N}(0, I)"),
            ("g     = 1 / (n * sigma) * sum_i F~_i * eps_i          (estimates grad E[F(theta + sigma eps)])",
             r"g = \frac{1}{n\sigma} \sum_i \tilde F_i\, \epsilon_i"),
            ("theta <- theta + optimizer(g - (l2_coef / sigma) * theta)    (SGD or Adam, ascending)",
             r"\theta \leftarrow \theta + \operatorname{optimizer}\Big(g - \frac{l_2}{\sigma}\,\theta\Big)"),
        ],
        loop=[
            ("draw the generation's seeds and signs", "sample_population"),
            ("each member's noise, regenerated from its seed", "member_noise"),
            ("play each perturbed policy", "play_episodes"),
            ("shape the returns into centered ranks", "centered_ranks"),
            ("the gradient estimate", "es_gradient"),
            ("the step, on every worker's copy", "EvolutionStrategy.update"),
        ]),
    "impala": Algorithm(
        title="IMPALA and V-trace",
        road="Acting and learning split apart: actors play with weights that lag the learner's, "
             "and V-trace corrects for the lag with truncated importance weights.",
        equations=[
            ("rho_t    = min(rho_bar, pi(a_t|s_t) / mu(a_t|s_t)),   c_t = min(c_bar, pi / mu)",
             r"\rho_t = \min\left(\bar\rho, \frac{\pi(a_t \mid s_t)}{\mu(a_t \mid s_t)}\right), \qquad c_t = \min\left(\bar c, \frac{\pi}{\mu}\right)"),
            ("delta_t  = rho_t * (r_t + gamma * (1 - terminated_t) * V'_t - V(s_t))",
             r"\delta_t = \rho_t\big(r_t + \gamma\,(1 - \text{terminated}_t)\, V'_t - V(s_t)\big)"),
            ("vs_t     = V(s_t) + delta_t + gamma * c_t * (1 - done_t) * (vs_{t+1} - V(s_{t+1})),",
             r"v_t = V(s_t) + \delta_t + \gamma\, c_t\,(1 - \text{done}_t)\big(v_{t+1} - V(s_{t+1})\big)"),
            ("A_t      = rho_t * (r_t + gamma * (1 - terminated_t) * G_t - V(s_t))",
             r"A_t = \rho_t\big(r_t + \gamma\,(1 - \text{terminated}_t)\, G_t - V(s_t)\big)"),
        ],
        loop=[
            ("each actor plays a rollout with its weights' version", "Actor.rollout"),
            ("the learner takes rollouts as they arrive", "train:Collect"),
            ("V-trace targets under the current policy", "compute_vtrace"),
            ("one gradient step on the batch", "impala_loss"),
            ("publish the new weights", "train:Update"),
        ]),
    "mappo": Algorithm(
        title="Multi-Agent PPO (MAPPO)",
        road="PPO for a team: decentralized actors on their own observations, a centralized "
             "critic that sees the state, trained on the team reward.",
        equations=[
            ("ratio_t^i = pi_theta(a_t^i | o_t^i) / pi_old(a_t^i | o_t^i)",
             r"\rho_t^i = \frac{\pi_\theta(a_t^i \mid o_t^i)}{\pi_{\text{old}}(a_t^i \mid o_t^i)}"),
            ("L_clip    = sum_{t,i} m_t^i min(ratio_t^i A_t^i, clip(ratio_t^i, 1-eps, 1+eps) A_t^i)",
             r"L^{\text{clip}} = \frac{\sum_{t,i} m_t^i \min\big(\rho_t^i A_t^i, \operatorname{clip}(\rho_t^i, 1-\epsilon, 1+\epsilon) A_t^i\big)}{\sum_{t,i} m_t^i}"),
            ("GAE       delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t)", GAE_DELTA),
        ],
        loop=[
            ("collect T lock-steps of the N copies", "train:Collect"),
            ("the team reward", "team_reward"),
            ("GAE from the centralized critic", "compute_gae"),
            ("value normalization", "ValueNorm.update"),
            ("PPO's masked losses", "mappo_loss"),
        ]),
    "matd3": Algorithm(
        title="MADDPG and MATD3",
        road="TD3 for a team: one deterministic actor per agent and a centralized critic that "
             "sees every agent's action, with n-step returns from HARL's buffers.",
        equations=[
            ("exploration   a^i = clip(mu_i(o^i) + eps, -1, 1),                   eps ~ N(0, sigma^2)",
             r"a^i = \operatorname{clip}\big(\mu_i(o^i) + \epsilon, -1, 1\big)"),
            ("n-step return R = sum_{l<m} gamma^l r_{k+l}; m = n, or the window stops at the first",
             r"R = \sum_{l < m} \gamma^l\, r_{k+l}"),
            ("critic target y = R + gamma^m (1 - terminated_{k+m-1}) min(Q'_1, Q'_2)(s', a'^1..a'^n)",
             r"y = R + \gamma^m\,(1 - \text{terminated}_{k+m-1}) \min(Q'_1, Q'_2)(s', a'^1, \ldots, a'^n)"),
            ("actor loss    L_mu_i = -mean over the batch of Q_1(s, a^1, .., mu_i(o^i), .., a^n)",
             r"L_{\mu_i} = -\operatorname{mean}\, Q_1\big(s, a^1, \ldots, \mu_i(o^i), \ldots, a^n\big)"),
        ],
        loop=[
            ("collect one lock-step with noisy actions", "train:Collect"),
            ("store it; the n-step windows", "ReplayBuffer.gather"),
            ("n-step returns", "nstep_return"),
            ("the critic target", "critic_target"),
            ("each actor up the critic's gradient", "actor_loss"),
            ("critic, actor and target steps", "update"),
        ]),
}
