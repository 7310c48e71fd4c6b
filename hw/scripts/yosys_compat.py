#!/usr/bin/env python3
"""Rewrite the RTL into the SystemVerilog subset Yosys 0.23 reads.

The RTL is written for Verilator (and vendor tools); Yosys 0.23's own
front end lacks two constructs it uses:
  - `import PKG::*;` (in a file or a module header): the import is removed
    and every use of a name the package declares is qualified (PKG::NAME),
    which Yosys does read;
  - `return EXPR;` in functions: each becomes an assignment to the
    function's name guarded by a flag set by the first one, so an early
    return keeps its meaning (functions here are combinational and have no
    side effects besides their result).
  - unpacked array ports (`output logic [31:0] lim [6]`): every
    declaration of a name that is such a port somewhere becomes a packed
    vector (`logic [6*32-1:0] lim`), each use of an element a slice.
Comments are dropped. The copies go to OUTDIR; their paths are printed in
order. The sources themselves are never changed: lint and simulation read
them as written.

usage: yosys_compat.py OUTDIR FILE...
"""
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_$]*"


def strip_comments(s):
    out, i, n = [], 0, len(s)
    while i < n:
        if s.startswith("//", i):
            j = s.find("\n", i)
            i = n if j < 0 else j
        elif s.startswith("/*", i):
            j = s.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * s.count("\n", i, j))  # keep line numbers
            i = j
        elif s[i] == '"':
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            out.append(s[i:j + 1])
            i = j + 1
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def package_names(src):
    """Names a package declares: parameters, functions, types, enum members."""
    names = set()
    for m in re.finditer(r"\b(?:localparam|parameter)\b([^;=]*?)(" + IDENT + r")\s*=", src):
        names.add(m.group(2))
    # More parameters in one declaration: localparam int A = 1, B = 2;
    for m in re.finditer(r"\b(?:localparam|parameter)\b[^;]*;", src):
        for n in re.finditer(r",\s*(" + IDENT + r")\s*=", m.group(0)):
            names.add(n.group(1))
    for m in re.finditer(r"\bfunction\b[^;(]*?(" + IDENT + r")\s*\(", src):
        names.add(m.group(1))
    for m in re.finditer(r"\btypedef\b[^;]*?(" + IDENT + r")\s*;", src):
        names.add(m.group(1))
    for m in re.finditer(r"\benum\b[^{]*\{([^}]*)\}", src):
        for item in m.group(1).split(","):
            n = re.match(r"\s*(" + IDENT + ")", item)
            if n:
                names.add(n.group(1))
    return names


def rewrite_returns(src, path):
    out, pos = [], 0
    for m in re.finditer(r"\bfunction\b(.*?)\bendfunction\b", src, re.S):
        body = m.group(0)
        if not re.search(r"\breturn\b", body):
            continue
        name = re.match(r"function\b[^;(]*?(" + IDENT + r")\s*\(", body, re.S)
        if not name:
            sys.exit(f"yosys_compat: {path}: a function with return whose name is not found")
        fn = name.group(1)
        # The header ends at the first ';' after its port list.
        depth, i = 0, name.end() - 1
        while i < len(body):
            if body[i] == "(":
                depth += 1
            elif body[i] == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        semi = body.index(";", i) + 1
        inner = body[semi:-len("endfunction")]
        inner = re.sub(r"\breturn\b\s*([^;]*);",
                       lambda r: f"begin if (!dxpu_ret_) begin {fn} = {r.group(1)}; dxpu_ret_ = 1'b1; end end", inner)
        new = (body[:semi] + " logic dxpu_ret_; dxpu_ret_ = 1'b0; begin" + inner.replace("\n", " ")
               + " end\n" * 1 + "endfunction")
        # Keep the line count: the function's lines are joined into one.
        new += "\n" * (body.count("\n") - new.count("\n"))
        out.append(src[pos:m.start()])
        out.append(new)
        pos = m.end()
    out.append(src[pos:])
    return "".join(out)


def main():
    if len(sys.argv) < 3:
        print("usage: yosys_compat.py OUTDIR FILE...", file=sys.stderr)
        sys.exit(2)
    outdir, files = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    srcs = {}
    for f in files:
        try:
            with open(f) as fh:
                srcs[f] = strip_comments(fh.read())
        except OSError as e:
            sys.exit(f"yosys_compat: {e}")
    pkgs = {}
    for src in srcs.values():
        for m in re.finditer(r"\bpackage\s+(" + IDENT + r")\s*;(.*?)\bendpackage\b", src, re.S):
            pkgs[m.group(1)] = package_names(m.group(2))
    # Names of unpacked array ports, anywhere.
    port_arrays = set()
    for src in srcs.values():
        for m in re.finditer(r"\b(?:input|output|inout)\s+(?:wire\s+|var\s+)?logic\s*(?:\[[^\]]*\])?\s*(" + IDENT
                             + r")\s*\[[^\]]+\]", src):
            port_arrays.add(m.group(1))
    # Yosys 0.23 has neither unpacked array ports nor packed arrays of
    # more than one dimension: such a port becomes one flat vector, each
    # element a W-bit slice (NAME[i] -> NAME[(i)*W +: W]).
    widths = {}
    for src in srcs.values():
        for n in port_arrays:
            m = re.search(r"\blogic\s*\[([^\]:]+):([^\]]+)\]\s*" + re.escape(n) + r"\s*\[", src)
            if m:
                widths[n] = f"(({m.group(1)})-({m.group(2)})+1)"
            elif re.search(r"\blogic\s+" + re.escape(n) + r"\s*\[", src):
                widths[n] = "1"
    for f, src in list(srcs.items()):
        for n in port_arrays:
            w = widths.get(n)
            if w is None:
                sys.exit(f"yosys_compat: {f}: the element width of array port {n} is not found")
            src = re.sub(r"\blogic\s*(?:\[[^\]]*\])?\s*(" + re.escape(n) + r")\s*\[([^\]:]+)\]",
                         lambda m: f"logic [({m.group(2)})*{w}-1:0] {m.group(1)}", src)
            out, pos = [], 0
            for m in re.finditer(r"(?<![\w$.])" + re.escape(n) + r"\s*\[", src):
                depth, i = 1, m.end()
                while depth:
                    if i >= len(src):
                        sys.exit(f"yosys_compat: {f}: unbalanced [ after {n}")
                    depth += {"[": 1, "]": -1}.get(src[i], 0)
                    i += 1
                idx = src[m.end():i - 1]
                out.append(src[pos:m.start()] + f"{n}[({idx})*{w} +: {w}]")
                pos = i
            out.append(src[pos:])
            src = "".join(out)
        srcs[f] = src
    for f, src in srcs.items():
        imported = []
        def drop(m):
            imported.append(m.group(1))
            return ""
        src = re.sub(r"\bimport\s+(" + IDENT + r")::\*\s*;", drop, src)
        for p in dict.fromkeys(imported):
            if p not in pkgs:
                sys.exit(f"yosys_compat: {f}: imports {p}, a package not among the files")
            for n in sorted(pkgs[p], key=len, reverse=True):
                # Not after '::' (already qualified), '.' (a member) or '`'.
                src = re.sub(r"(?<![:.`$\w])" + re.escape(n) + r"\b", p + "::" + n, src)
        src = rewrite_returns(src, f)
        out = os.path.join(outdir, os.path.basename(f))
        with open(out, "w") as fh:
            fh.write(src)
        print(out)


if __name__ == "__main__":
    main()
