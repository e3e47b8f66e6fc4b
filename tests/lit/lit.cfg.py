# lit configuration for tessel's IR golden tests (.tir in, FileCheck out).
#
#   lit -v tests/lit                                   # newest build*/bin/tessel
#   lit -v tests/lit --param tessel=/path/to/tessel    # or any build
#   lit -v tests/lit --param filecheck=/path/to/FileCheck
#
# Substitutions: %tessel (the CLI), FileCheck, not.
import os
import shutil

import lit.formats

config.name = "tessel"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".tir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "README.md"]

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def first_existing(paths):
    for p in paths:
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def newest_build_binary():
    # The most recently built <root>/build*/bin/tessel.
    found = []
    for d in os.listdir(root):
        p = os.path.join(root, d, "bin", "tessel")
        if d.startswith("build") and os.path.isfile(p) and os.access(p, os.X_OK):
            found.append((os.path.getmtime(p), p))
    return max(found)[1] if found else None


tessel = lit_config.params.get("tessel") or first_existing([os.environ.get("TESSEL_BIN")]) or newest_build_binary()
if not tessel:
    lit_config.fatal("cannot find the tessel binary; pass --param tessel=PATH")
filecheck = lit_config.params.get("filecheck") or first_existing(
    ["/usr/lib/llvm-19/bin/FileCheck", shutil.which("FileCheck") or ""]
)
if not filecheck:
    lit_config.fatal("cannot find FileCheck; pass --param filecheck=PATH")
not_tool = first_existing(["/usr/lib/llvm-19/bin/not", shutil.which("not") or ""])

config.substitutions.append(("%tessel", tessel))
config.substitutions.append(("FileCheck", filecheck))
if not_tool:
    config.substitutions.append(("not ", not_tool + " "))
config.environment["PATH"] = os.environ.get("PATH", "")
