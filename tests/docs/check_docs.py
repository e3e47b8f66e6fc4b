#!/usr/bin/env python3
"""Checks that README.md and docs/*.md name only things that exist.

1. Repository paths in backticks, code blocks and links exist: a path whose first folder is a top-level folder of the
   repository (src/, tests/, scripts/, ...) or a folder of src/tessel/ (ops/, codegen/, ...) is looked up at the
   repository root and under src/tessel/; globs must match something, a name without extension may be a stem. In backticks and links a bare file name with a
   source extension (`hash.h`) must be the name of some file of the repository. Build outputs, placeholders,
   absolute paths and URLs are not paths of the repository and are skipped.
2. Every `tessel SUBCOMMAND` is a subcommand of `tessel --help`, and every flag of a tessel command line is in the
   subcommand's --help (or the top-level one); a value of an option with listed choices (or of --emit) is one of them.

Usage: check_docs.py --tessel build/bin/tessel. Prints FILE:LINE: message per miss and exits 1 if there is any.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOT_DIRS = {"src", "include", "tests", "scripts", "tools", "bench", "examples", "docs", "python", "fuzz", "models",
             ".ci"}
SOURCE_EXTS = (".cpp", ".h", ".hpp", ".c", ".py", ".sh", ".md", ".txt", ".toml", ".cmake", ".proto")
# Headers of the CUDA toolkit or the system, named in the docs but not part of the repository.
EXTERNAL_NAMES = {"cuda_fp16.h", "cuda_bf16.h", "cuda.h", "nvrtc.h", "dlpack.h", "stdint.h", "onnx.proto"}
SKIP_DIRS = {".git", "build", "node_modules", "__pycache__"}
# Words of a diagram are separated by spaces and by box-drawing lines and arrows (`──passes/──▶`).
WORD_BREAK = re.compile(r"[\s\u2500-\u25ff]+")


def repo_files():
    names = set()
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(("build", "gpu-", "."))]
        names.update(files)
    return names


def tessel_dirs():
    base = os.path.join(REPO, "src", "tessel")
    return {d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))}


def clean_token(tok):
    """The path-like core of a token: no quotes, brackets, trailing punctuation or :LINE suffix."""
    tok = tok.strip("\"'()[],;")
    tok = re.sub(r":\d+(-\d+)?$", "", tok)
    return tok.rstrip(".:,;")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


def exists(path):
    """At the root or under src/tessel/: the path, a glob that matches, or a file's stem (`ir/parser` for .h/.cpp)."""
    for base in (REPO, os.path.join(REPO, "src", "tessel")):
        full = os.path.join(base, path)
        if glob.glob(full) if any(c in path for c in "*?[") else os.path.exists(full) or glob.glob(full + ".*"):
            return True
    return False


class Checker:
    def __init__(self, tessel):
        self.misses = []
        self.paths = self.commands = 0  # how many were checked, so that a check that matches nothing shows
        self.files = repo_files()
        self.dirs = tessel_dirs()
        top = self.help(tessel, [])
        section = top.split("Subcommands:", 1)[1] if "Subcommands:" in top else ""
        self.subcommands = {m.group(1) for m in re.finditer(r"^\s+([a-z][a-z0-9-]*)\s", section, re.M)}
        self.top_options = self.options(top)
        self.sub_options = {s: self.options(self.help(tessel, [s])) for s in self.subcommands}

    @staticmethod
    def help(tessel, sub):
        out = subprocess.run([tessel, *sub, "--help"], capture_output=True, text=True, check=True)
        return out.stdout

    @staticmethod
    def options(text):
        """Flag -> its help text, from CLI11's listing (an option's description may wrap onto indented lines)."""
        entries = []
        for line in text.splitlines():
            m = re.match(r"^\s{2}((?:-[\w-]+,)*-[\w-]+)(.*)$", line)
            if m:
                entries.append((m.group(1).split(","), [m.group(2)]))
            elif entries and line.startswith("    "):
                entries[-1][1].append(line.strip())
        return {flag: " ".join(text_) for flags, text_ in entries for flag in flags}

    def miss(self, where, message):
        self.misses.append(f"{where[0]}:{where[1]}: {message}")

    # --- paths -------------------------------------------------------------------------------------------------------
    def check_path(self, where, tok, bare_names):
        tok = clean_token(tok)
        if not tok or "://" in tok or tok.startswith(("/", "~", "$", "<", "..", "-")) or "=" in tok:
            return
        if "/" in tok:
            first = tok.split("/", 1)[0]
            if first not in ROOT_DIRS and first not in self.dirs:
                return
            self.paths += 1
            if not any(exists(p) for p in expand_braces(tok)):
                self.miss(where, f"path '{tok}' does not exist")
        elif bare_names and tok.endswith(SOURCE_EXTS) and re.fullmatch(r"[\w.+-]+", tok):
            self.paths += 1
            if tok not in self.files and tok not in EXTERNAL_NAMES:
                self.miss(where, f"file name '{tok}' is no file of the repository")

    # --- tessel command lines ----------------------------------------------------------------------------------------
    def check_command(self, where, text, from_backticks):
        """Checks each command line that runs tessel (`tessel SUB --flag ...`, `build/bin/tessel ...`, after env
        assignments or xargs), and a backtick span that starts with a subcommand and names a flag (`bench --profile`)."""
        for segment in re.split(r" \| |&&|;", text):
            toks = segment.split()
            while toks and (re.fullmatch(r"[A-Z_]+=\S*", toks[0]) or toks[0] in ("$", "xargs", "time", "exec")):
                toks = toks[1:]
            if toks and (toks[0] == "tessel" or toks[0].endswith("bin/tessel") or toks[0] == "gpu-bundle/tessel"):
                self.check_args(where, toks[1:])
            elif from_backticks and len(toks) > 1 and toks[0] in self.subcommands and toks[1].startswith("-"):
                self.check_args(where, toks)

    def check_args(self, where, args):
        self.commands += 1
        if "--" in args:
            args = args[:args.index("--")]  # what follows `--` belongs to another program
        subs = []
        if args and re.fullmatch(r"[a-z][a-z0-9|-]*", args[0]):
            subs = args[0].split("|")  # `tessel run|bench --target cuda` names several
            for sub in subs:
                if sub not in self.subcommands:
                    self.miss(where, f"'tessel {sub}' is not a subcommand of tessel --help")
                    return
        for sub in subs or [None]:
            options = dict(self.top_options, **self.sub_options.get(sub, {}))
            name = f"tessel {sub}" if sub else "tessel"
            for i, arg in enumerate(args):
                m = re.match(r"^(--?[A-Za-z][\w-]*)(?:=(.*))?$", arg.strip("[]()`"))
                if not m:
                    continue
                flag = m.group(1)
                if flag not in options:
                    self.miss(where, f"'{flag}' is not an option of '{name}' (its --help)")
                    continue
                value = m.group(2) if m.group(2) is not None else (args[i + 1] if i + 1 < len(args) else "")
                self.check_value(where, flag, value.strip("[]()`,."), options[flag])

    def check_value(self, where, flag, value, help_line):
        choices = re.search(r"\{([\w,-]+)\}", help_line)
        if choices:
            allowed = set(choices.group(1).split(","))
        elif flag == "--emit":
            allowed = set(re.findall(r"\b([a-z]+)\b", help_line))
        else:
            return
        if not re.fullmatch(r"[a-z0-9_|]+", value or "-"):  # a placeholder (KIND, NAME, ...) is not a value
            return
        for v in value.split("|"):
            if v and v not in allowed:
                self.miss(where, f"'{flag} {v}': not a value tessel's help lists")

    # --- files -------------------------------------------------------------------------------------------------------
    def check_file(self, rel):
        lines = open(os.path.join(REPO, rel), encoding="utf-8").read().split("\n")
        prose, fence = [], None
        for n, line in enumerate(lines, 1):
            marker = re.match(r"^\s*(```|~~~)", line)
            if marker and fence is None:
                fence = marker.group(1)
                prose.append("")
                continue
            if marker and line.strip().startswith(fence):
                fence = None
                prose.append("")
                continue
            if fence is not None:
                prose.append("")
                self.check_code_line(rel, n, lines, line)
            else:
                prose.append(line)
        self.check_prose(rel, "\n".join(prose))

    def check_code_line(self, rel, n, lines, line):
        if n >= 2 and lines[n - 2].rstrip().endswith("\\"):
            return  # a continuation, checked with the line that starts the command
        text, k = line, n
        while text.rstrip().endswith("\\") and k < len(lines):
            text = text.rstrip()[:-1] + " " + lines[k]
            k += 1
        code = re.sub(r"(^|\s)#.*$", "", text)  # a shell comment is prose, not a command
        for tok in WORD_BREAK.split(code):
            self.check_path((rel, n), tok, bare_names=False)
        self.check_command((rel, n), code, from_backticks=False)

    def check_prose(self, rel, text):
        def line_of(pos):
            return text.count("\n", 0, pos) + 1

        for m in re.finditer(r"`([^`]+)`", text):
            span = m.group(1).replace("\\|", "|").replace("\n", " ")
            where = (rel, line_of(m.start()))
            for tok in WORD_BREAK.split(span):
                self.check_path(where, tok, bare_names=True)
            self.check_command(where, span, from_backticks=True)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1).split("#", 1)[0]
            if target and "://" not in target and not target.startswith("mailto:"):
                local = os.path.normpath(os.path.join(os.path.dirname(rel), target))
                if not os.path.exists(os.path.join(REPO, local)):
                    self.miss((rel, line_of(m.start())), f"link target '{target}' does not exist")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessel", required=True, help="the tessel binary whose --help is the reference")
    args = parser.parse_args()
    try:
        checker = Checker(args.tessel)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"check_docs: cannot read {args.tessel} --help: {e}")
        return 2
    docs = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(REPO, "docs"))
                                  if f.endswith(".md"))
    for rel in docs:
        checker.check_file(rel)
    for line in sorted(checker.misses, key=lambda m: (m.split(":")[0], int(m.split(":")[1]))):
        print(line)
    print(f"check_docs: {len(docs)} files, {checker.paths} paths, {checker.commands} tessel command lines, "
          f"{len(checker.misses)} problems")
    return 1 if checker.misses else 0


if __name__ == "__main__":
    sys.exit(main())
