"""LAMB (You, Li, Reddi et al. 2019, "Large Batch Optimization for Deep Learning: Training
BERT in 76 minutes", Algorithm 2) as a torch.optim.Optimizer, written from the paper: the
reference Sesame's LAMB (src/ops/adamw.rs, `--optimizer lamb`) is checked against.

For each parameter tensor x with gradient g, at step t (from 1):
    m = β1·m + (1 − β1)·g          v = β2·v + (1 − β2)·g²
    u = (m / (1 − β1^t)) / (√(v / (1 − β2^t)) + eps) + λ·x
    x = x − lr · r · u,   r = ‖x‖ / ‖u‖ when both norms are positive, else 1
with φ the identity. A parameter group with "adapt": False takes r = 1 (ALBERT's LAMB
excludes LayerNorm and bias from the layer adaptation, as from weight decay).
"""

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr, betas, eps, weight_decay=0.0, adapt=True):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=adapt))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for x in group["params"]:
                if x.grad is None:
                    continue
                state = self.state[x]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(x)
                    state["v"] = torch.zeros_like(x)
                state["step"] += 1
                t, m, v, g = state["step"], state["m"], state["v"], x.grad
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                u = (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + group["eps"]) + group["weight_decay"] * x
                ratio = 1.0
                if group["adapt"]:
                    x_norm, u_norm = x.norm().item(), u.norm().item()
                    if x_norm > 0 and u_norm > 0:
                        ratio = x_norm / u_norm
                x.sub_(group["lr"] * ratio * u)
