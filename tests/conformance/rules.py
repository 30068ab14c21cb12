"""Which of PyTorch's tests apply to the engine: static rules over a test's source, written down.

Note [Not applicable, by rule]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A test is not applicable when its source (the method, decorators included) matches a rule below:
it needs something the engine does not claim to be (docs/engine.md: eager CPU autograd and
torch.utils.checkpoint over NumPy, real and complex dtypes). Complex numbers had a rule until
the engine supported them (engine/ops/complex.py): of the 10 tests it excluded, 9 apply (one
falls under the torch._C rule) and 8 of those pass. The decision reads the source only, never the
outcome of a run: a test that matches no rule counts, pass or fail. Each rule is one reason; the
first rule that matches is the one reported. Adding a rule to make a failing test disappear is
not what they are for: a rule names a *feature*, and every test using it goes.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    reason: str
    pattern: re.Pattern[str]
    on: str = "source"  # what the pattern searches: the method's "source", or the test's "name"


def _rule(reason: str, pattern: str, on: str = "source") -> Rule:
    return Rule(reason, re.compile(pattern), on)


# torch._C names the engine mirrors on purpose (engine/_C.py, docs/engine.md); any other is internal.
ENGINE_C_NAMES = (
    "_current_graph_task_id",
    "_will_engine_execute_node",
    "_get_sequence_nr",
    "is_grad_enabled",
)

RULES: tuple[Rule, ...] = (
    _rule(
        "needs an accelerator (CUDA, NPU, MPS, XPU) or several devices",
        r"\bcuda\b|\.cuda\(|\bnpu\b|torch_npu|PRIVATEUSE1|TEST_GPU|TEST_MULTIGPU|HAS_CUDA|\bmps\b|\bxpu\b"
        r"|DataParallel|torch\.distributed|Stream\(|device_count",
    ),
    _rule("slow test: PyTorch itself skips it unless PYTORCH_TEST_WITH_SLOW is set", r"@slowTest"),
    _rule(
        "torch.compile, dynamo, FX tracing or fake tensors",
        r"torch\.compile|_dynamo|_inductor|make_fx|torch\.fx|torch\.export|aot_function|aot_module"
        r"|functionalize|FakeTensor|fake_tensor",
    ),
    _rule(
        "threads, multiprocessing or subprocesses",
        r"threading|Thread\(|ThreadPool|multiprocessing|subprocess|concurrent\.futures|set_multithreading_enabled",
    ),
    _rule(
        "TorchScript, C++ extensions or custom C++ operators",
        r"torch\.jit|load_inline|cpp_extension|torch\.library|custom_op\b|_custom_ops",
    ),
    _rule(
        "the profiler",
        r"profiler|\bprofile\(|record_function|emit_nvtx|emit_itt|kineto|FunctionEvent|EventList|_format_time",
    ),
    _rule(
        "forward-mode AD, vmap or functorch (the engine is reverse mode only)",
        r"forward_ad|fwAD|make_dual|unpack_dual|_set_fwd_grad_enabled|vectorize=True|\bvmap\b|functorch"
        r"|torch\.func\b|is_grads_batched|forward-mode|check_forward_ad|check_batched_grad=True",
    ),
    _rule(
        "tensor subclasses or Python dispatch (__torch_dispatch__, __torch_function__, TorchDispatchMode)",
        r"__torch_dispatch__|__torch_function__|TorchDispatchMode|LoggingTensor|_make_subclass"
        r"|_make_wrapper_subclass|no_dispatch|_python_dispatch|_get_current_dispatch_mode|FlopCounterMode",
    ),
    # test_functional.py runs most tests twice, on plain tensors and on LoggingTensor (a
    # __torch_dispatch__ subclass): the second variant's name says so.
    _rule(
        "tensor subclasses or Python dispatch (__torch_dispatch__, __torch_function__, TorchDispatchMode)",
        r"logging_tensor",
        on="name",
    ),
    _rule(
        "sparse, mkldnn, nested, named or quantized tensors",
        r"sparse|mkldnn|torch\.nested|nested_tensor|jagged|refine_names|\bnames=|quantize|qint",
    ),
    _rule("bfloat16 or autocast (NumPy has no bfloat16)", r"bfloat16|autocast|\bamp\b"),
    _rule("meta tensors or device='meta'", r"""['"]meta['"]|device=torch\.device\(['"]meta"""),
    _rule("serialization (pickle, torch.save/load)", r"pickle|torch\.save|torch\.load\("),
    _rule(
        "tensor storage or reference-count internals",
        r"sys\.getrefcount|_get_refcount|untyped_storage|_storage\(|StorageWeakRef|_WeakTensorRef|_cached_tensor"
        r"|set_\(|resize_\(|_unsafe_set_version_counter|_stash_obj_in_tls|_get_obj_in_tls|_is_key_in_tls",
    ),
    _rule(
        "internal C++ API (torch._C names the engine does not mirror)",
        r"torch\._C\.(?!(?:" + "|".join(ENGINE_C_NAMES) + r")\b)",
    ),
    _rule("PyTorch's expect files or OpInfo database (not vendored)", r"assertExpected\(|\bop_db\b|@ops\("),
)


def strip_comments(src: str) -> str:
    """The source with its comments blanked out: a comment mentioning CUDA is no use of CUDA."""
    lines = src.splitlines()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src
    return "\n".join(lines)


def classify(source: str, name: str = "") -> str | None:
    """Why the test of this source (a method, decorators included) and this name (parametrized
    tests add their parameters to it) does not apply to the engine, or None if it applies."""
    source = strip_comments(source)
    for rule in RULES:
        if rule.pattern.search(name if rule.on == "name" else source):
            return rule.reason
    return None
