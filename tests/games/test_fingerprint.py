"""Code digests for checkpoint fingerprints: an edit changes them, nothing else does."""

import functools
import importlib
import subprocess
import sys
import textwrap

from auditsel.games.fingerprint import package_digest, source_digest


def _module(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.invalidate_caches()
        sys.modules.pop(name, None)
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_an_edited_function_or_helper_changes_the_digest(tmp_path):
    a = _module(
        tmp_path, "fp_a", "def helper(x):\n    return x\n\ndef f(x):\n    return helper(x)\n"
    )
    before = source_digest(a.f)
    assert source_digest(a.f) == before
    b = _module(
        tmp_path, "fp_a", "def helper(x):\n    return 2 * x\n\ndef f(x):\n    return helper(x)\n"
    )
    assert source_digest(b.f) != before


def test_bound_arguments_and_callable_instances_count(tmp_path):
    m = _module(
        tmp_path,
        "fp_b",
        """
        class Score:
            def __init__(self, k):
                self.k = k
            def __call__(self, x):
                return self.k * x

        def g(x, k=1):
            return k * x
        """,
    )
    assert source_digest(functools.partial(m.g, k=1)) != source_digest(functools.partial(m.g, k=2))
    assert source_digest(m.Score(1)) == source_digest(m.Score(1))
    assert source_digest(m.Score(1)) != source_digest(m.Score(2))


def test_functions_made_at_run_time_have_a_bytecode_digest():
    f = eval("lambda x: x + 1")
    g = eval("lambda x: x + 2")
    assert source_digest(f) != source_digest(g)


def test_the_digests_are_the_same_in_another_process():
    code = "from auditsel.games.fingerprint import package_digest, source_digest; import json; print(package_digest(), source_digest(json.dumps))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import json

    assert out.stdout.split() == [package_digest(), source_digest(json.dumps)]
