"""Models: the single-layer attention model of eq. (1) in its four parameterisations."""

from .attention import PARAMETERISATIONS, AttentionConfig, check_init, effective_circuits, forward, init_params

__all__ = ["PARAMETERISATIONS", "AttentionConfig", "check_init", "effective_circuits", "forward", "init_params"]
