#!/usr/bin/env python3
"""Runs the ONNX backend node tests through `tessel test-onnx` and checks the
result against the list of expected failures.

    check_node_tests.py [--tessel BIN] [--cases DIR] [--expected FILE]
                        [--target reference] [--update] [--min-pass-rate 90]

The cases are the folders under DIR (build/node_tests, written by
tools/gen_node_tests.py; generated here when missing). The expected-failures
file holds one case name per line ('#' starts a comment). The check fails when

  - a case fails that is not listed (a regression, or a new case);
  - a listed case now passes (the list may only shrink: remove it);
  - the pass rate is below --min-pass-rate percent.

The denominator is every generated case; the cases the generator excluded
(build/node_tests/excluded.txt: training ops, ai.onnx.ml, non-tensor inputs)
are not in it.

--update rewrites the expected-failures file from this run (keeping its
header comment) and succeeds unless the pass rate is too low.

All cases run in one tessel process. If that process dies (a crash, not a
failed case), the cases are split and rerun to find the one that kills it,
which is then reported as failing with status "crash".
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "bin", "tessel"))
    p.add_argument("--cases", default=os.path.join(ROOT, "build", "node_tests"))
    p.add_argument("--expected", default=os.path.join(ROOT, "tests", "node_tests_expected_failures", "onnx-1.23.txt"))
    p.add_argument("--target", default="reference")
    p.add_argument("--update", action="store_true", help="rewrite the expected-failures list from this run")
    p.add_argument("--min-pass-rate", type=float, default=90.0)
    p.add_argument("--min-compiled-rate", type=float, default=0.0,
                   help="percent of all cases that must run with no node on the interpreter (target cpu)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds for one tessel process")
    p.add_argument("--json-out", help="also write the per-case results here")
    p.add_argument("-v", "--verbose", action="store_true", help="print every failing case's message")
    return p.parse_args()


def ensure_cases(cases_dir):
    if os.path.isfile(os.path.join(cases_dir, "excluded.txt")):
        return
    print(f"generating node tests into {cases_dir}", flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "gen_node_tests.py"), cases_dir], check=True)


def list_cases(cases_dir):
    return sorted(d for d in os.listdir(cases_dir) if os.path.isfile(os.path.join(cases_dir, d, "model.onnx")))


def read_list(path):
    names = []
    if not os.path.exists(path):
        return names
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    return names


def header_of(path):
    lines = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if not line.startswith("#"):
                    break
                lines.append(line)
    return lines


def run_batch(args, cases_dir, names, timeout):
    """Runs `names` in one process; returns {name: result} or None if it died."""
    cmd = [args.tessel, "test-onnx", "--target", args.target, "--json"] + [os.path.join(cases_dir, n) for n in names]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode not in (0, 1):
        return None
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return None
    if "cases" not in doc:
        # A top-level error (e.g. a bad folder): report it and stop.
        sys.exit(f"tessel test-onnx failed: {doc.get('error', p.stderr.decode(errors='replace'))}")
    return {c["name"]: c for c in doc["cases"]}


def run_all(args, cases_dir, names, timeout):
    res = run_batch(args, cases_dir, names, timeout)
    if res is not None:
        return res
    if len(names) == 1:
        return {names[0]: {"name": names[0], "status": "crash", "message": "tessel died or timed out on this case",
                           "interpreter_nodes": []}}
    print(f"  tessel died on a batch of {len(names)} cases; splitting", flush=True)
    mid = len(names) // 2
    sub = max(120.0, timeout / 2)
    out = run_all(args, cases_dir, names[:mid], sub)
    out.update(run_all(args, cases_dir, names[mid:], sub))
    return out


def main():
    args = parse_args()
    if not os.path.isfile(args.tessel):
        sys.exit(f"tessel binary not found: {args.tessel}")
    ensure_cases(args.cases)
    names = list_cases(args.cases)
    if not names:
        sys.exit(f"no test cases under {args.cases}")
    t0 = time.time()
    results = run_all(args, args.cases, names, args.timeout)
    elapsed = time.time() - t0

    failing = sorted(n for n in names if results.get(n, {}).get("status") != "pass")
    passed = len(names) - len(failing)
    rate = 100.0 * passed / len(names)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump([results.get(n, {"name": n, "status": "missing"}) for n in names], f, indent=1)

    expected = read_list(args.expected)
    expected_set = set(expected)
    unexpected = [n for n in failing if n not in expected_set]
    now_passing = [n for n in expected if n in results and results[n].get("status") == "pass"]
    print(f"node tests: {passed}/{len(names)} passed ({rate:.1f}%) in {elapsed:.0f} s, target {args.target}")
    compiled = [n for n in names if n in results and results[n].get("status") != "crash"
                and not results[n].get("interpreter_nodes")]
    compiled_rate = 100.0 * len(compiled) / len(names)
    if args.target != "reference":
        n_ok = sum(results[n].get("status") == "pass" for n in compiled)
        print(f"node tests: {len(compiled)}/{len(names)} ({compiled_rate:.1f}%) ran with no interpreter node, "
              f"{n_ok} of them pass")

    if args.update:
        os.makedirs(os.path.dirname(args.expected), exist_ok=True)
        head = header_of(args.expected) or [
            "# ONNX node tests (onnx 1.23) expected to fail with --target reference.\n",
            "# One case name per line; tools/check_node_tests.py --update rewrites it.\n",
            "# The list may only shrink.\n",
        ]
        with open(args.expected, "w") as f:
            f.writelines(head)
            for n in failing:
                f.write(n + "\n")
        print(f"wrote {len(failing)} expected failures to {args.expected}")
        return 0 if rate >= args.min_pass_rate else 1

    ok = True
    if unexpected:
        ok = False
        print(f"FAIL: {len(unexpected)} cases fail that are not in {os.path.relpath(args.expected, ROOT)}:")
        for n in unexpected:
            r = results.get(n, {})
            print(f"  {n}: {r.get('status', 'missing')}: {r.get('message', '')[:300]}")
    if now_passing:
        ok = False
        print(f"FAIL: {len(now_passing)} listed cases now pass; remove these from the list:")
        for n in now_passing:
            print(f"  {n}")
    stale = [n for n in expected if n not in results]
    if stale:
        print(f"note: {len(stale)} listed cases do not exist (remove them): {', '.join(stale[:10])}")
    if rate < args.min_pass_rate:
        ok = False
        print(f"FAIL: pass rate {rate:.1f}% is below {args.min_pass_rate}%")
    if compiled_rate < args.min_compiled_rate:
        ok = False
        print(f"FAIL: {compiled_rate:.1f}% of the cases ran with no interpreter node, below {args.min_compiled_rate}%")
    if args.verbose:
        for n in failing:
            r = results.get(n, {})
            print(f"  {r.get('status')}: {n}: {r.get('message', '')[:300]}")
    print("node tests: OK" if ok else "node tests: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
