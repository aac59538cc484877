"""opskew's own operator tracer, in process: `opskew.trace()` (session.py),
the collector libraries' ctypes life cycle (collectors.py, standard library
only: the record child loads it by path) and the native shim's builder
(native.py)."""

from opskew.tracer.session import TracerSetupError, arrange, now_ns, trace

__all__ = ["TracerSetupError", "arrange", "now_ns", "trace"]
