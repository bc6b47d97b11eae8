#!/usr/bin/env python3
"""Generates the MPI C interface of bcs from one list, so that the header,
the library and the coverage document never disagree.

Inputs
  mpi.api    every MPI-3.1 C function, one per line: `impl|stub <prototype>`,
             grouped under `[Chapter]` headings. `impl`: defined by hand in
             mpi-shim/src as PMPI_x with MPI_x a weak alias. `stub`: defined
             here; the call raises MPI_ERR_UNSUPPORTED_OPERATION naming
             itself through the error handler MPI says applies.
  mpi.h.in   types and constants; @BCS_MPI_FUNCTIONS@ and
             @BCS_PMPI_FUNCTIONS@ mark where the prototypes go.

Outputs (any subset)
  --header   mpi.h
  --stubs    a C++ file defining every stub (PMPI_x + weak MPI_x)
  --coverage docs/mpi-coverage.md
  --stub-test a C program checking that every stub raises its error
  --checks   a C++ file defining PMPI_x (+ weak MPI_x) of every implemented
             call: the argument checks its prototype implies, then the
             hand-written body bcs_impl_x
  --impl-header  the declarations of the bcs_impl_x bodies
  --check-test   a C program breaking each generated check once

The linker keeps the list honest: a function marked stub that is also
defined by hand is a duplicate definition, and one marked impl that nobody
defines is an undefined symbol (libmpi links with --no-undefined).
"""
import argparse
import re
import sys

PROTO = re.compile(r"^(?P<ret>[A-Za-z_][\w ]*?\s*\**)\s*\b(?P<name>MPI_\w+)\((?P<params>.*)\)$")


class Function:
    def __init__(self, status, chapter, ret, name, params, line):
        self.status = status
        self.chapter = chapter
        self.ret = ret
        self.name = name
        self.params = params  # list of parameter declarations, [] for (void)
        self.line = line

    @property
    def short(self):
        return self.name[len("MPI_"):]

    def decl(self, prefix=""):
        params = ", ".join(self.params) if self.params else "void"
        return f"{self.ret} {prefix}{self.name}({params});"


def split_params(text):
    """Splits a parameter list at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [] if out == ["void"] else out


def param_name(p):
    """(type without the name, name) of one parameter declaration."""
    if p == "...":
        return p, ""
    m = re.match(r"^(?P<head>.*?)(?P<name>[A-Za-z_]\w*)\s*(?P<arrays>(\[[^\]]*\])*)$", p)
    if not m or not m.group("head").strip():
        raise ValueError(f"cannot parse parameter '{p}'")
    head = m.group("head").rstrip()
    return head + (" " if not head.endswith("*") else "") + m.group("arrays"), m.group("name")


def read_api(path):
    funcs, chapter, seen = [], None, set()
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            chapter = line.strip("[]")
            continue
        status, _, proto = line.partition(" ")
        m = PROTO.match(proto.strip())
        if status not in ("impl", "stub") or not m or chapter is None:
            sys.exit(f"{path}:{n}: expected 'impl|stub <prototype>' under a [Chapter]: {line}")
        name = m.group("name")
        if name in seen:
            sys.exit(f"{path}:{n}: {name} listed twice")
        seen.add(name)
        funcs.append(Function(status, chapter, " ".join(m.group("ret").split()), name,
                              split_params(m.group("params")), n))
    return funcs


def stub_body(f):
    """The definition of a stub: which error handler MPI says applies."""
    if f.ret != "int":
        sys.exit(f"mpi.api:{f.line}: {f.name} returns {f.ret}: such calls must be implemented")
    typed = [param_name(p) for p in f.params]
    target = None
    for (t, n) in typed:
        if t.strip() == "MPI_Comm":
            target = ("comm", n)
            break
    if f.name.startswith("MPI_File_") or f.name == "MPI_Register_datarep":
        target = ("file", None)
    elif f.name.startswith("MPI_T_"):
        sys.exit(f"mpi.api:{f.line}: {f.name}: MPI_T calls return MPI_T_ERR_* codes, not error "
                 "classes: implement them")
    params = []
    for (t, n) in typed:
        keep = target is not None and target[1] == n
        params.append(f"{t}{n}" if keep else t.rstrip())
    sig = ", ".join(params) if params else "void"
    if target is None:
        call = f'unsupported_call(kNoComm, "{f.name}")'
    elif target[0] == "comm":
        call = f'unsupported_call(comm_index({target[1]}), "{f.name}")'
    else:
        call = f'unsupported_file_call("{f.name}")'
    return f"BCS_PMPI_ALIAS({f.short})\nint PMPI_{f.short}({sig}) {{ return {call}; }}\n"


def write_stubs(funcs, path):
    out = [
        "// GENERATED by mpi-shim/api/mpigen.py from mpi-shim/api/mpi.api: do not edit.",
        "// The MPI-3.1 calls bcs does not implement yet. Each links and, when",
        "// called, raises MPI_ERR_UNSUPPORTED_OPERATION naming itself (never a",
        "// silent success): through the communicator's error handler when the call",
        "// has one, MPI_COMM_WORLD's otherwise; file calls return the error (the",
        "// default file error handler is MPI_ERRORS_RETURN).",
        '#include "shim.h"',
        "",
        "using namespace bcs::shim;",
        "",
        'extern "C" {',
    ]
    for f in funcs:
        if f.status == "stub":
            out.append(stub_body(f))
    out.append('}  // extern "C"')
    write(path, "\n".join(out) + "\n")


def write_stub_test(funcs, path):
    """A C program calling every stub once under MPI_ERRORS_RETURN: each must
    return MPI_ERR_UNSUPPORTED_OPERATION (stubs never read their arguments,
    so zeros do). It prints the count and exits non-zero on any mismatch."""
    out = [
        "/* GENERATED by mpi-shim/api/mpigen.py from mpi-shim/api/mpi.api: do not edit. */",
        "#include <mpi.h>",
        "#include <stdio.h>",
        "",
        "static int failed, called;",
        "static void expect(const char *fn, int rc) {",
        "  ++called;",
        "  if (rc != MPI_ERR_UNSUPPORTED_OPERATION) {",
        '    fprintf(stderr, "%s returned %d, not MPI_ERR_UNSUPPORTED_OPERATION\\n", fn, rc);',
        "    ++failed;",
        "  }",
        "}",
        "",
        "int main(int argc, char **argv) {",
        "  MPI_Init(&argc, &argv);",
        "  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);",
    ]
    for f in funcs:
        if f.status != "stub":
            continue
        args = ", ".join("0" for _ in f.params)
        out.append(f'  expect("{f.name}", {f.name}({args}));')
    out += [
        '  printf("%d unimplemented calls raised MPI_ERR_UNSUPPORTED_OPERATION, %d did not\\n",',
        "         called - failed, failed);",
        "  MPI_Finalize();",
        "  return failed != 0;",
        "}",
    ]
    write(path, "\n".join(out) + "\n")


# ---------------------------------------------------------------- checks
# The argument checks every implemented call gets before its hand-written
# body runs, derived from the prototypes by these rules, so a call cannot
# forget one and every call reports the same error the same way. The body
# keeps the checks that need meaning (ranks against the group size, roots,
# buffers, op against type).

# Communicator parameters that are significant at every process.
CHECK_COMM_NAMES = {"comm", "comm_old", "local_comm", "intercomm", "comm1", "comm2"}
# Calls whose communicator argument is not checked: MPI_Abort must abort
# whatever it is given.
CHECK_COMM_EXEMPT = {"MPI_Abort"}
# Output pointers that may be NULL in one call: MPI_Info_get_string asks
# for the value's length alone with *buflen 0 and value NULL.
CHECK_OUT_EXEMPT = {("MPI_Info_get_string", "value")}
# Element counts: a negative one is MPI_ERR_COUNT.
CHECK_COUNT_NAMES = {"count", "incount"}
# Chapters where `MPI_Datatype datatype` describes a message and must be a
# committed type (datatype queries accept any live handle).
CHECK_TYPE_CHAPTERS = {"Point-to-point communication", "Collective operations"}
# Pointers through which the call returns something: NULL is MPI_ERR_ARG.
CHECK_OUT = {
    "int *": {"combiner", "comm_keyval", "commute", "count", "errorclass", "errorcode",
              "flag", "index", "keyval", "ndims", "nedges", "newrank", "nkeys",
              "nneighbors", "nnodes", "num_addresses", "num_datatypes", "num_integers",
              "outcount", "position", "provided", "rank", "rank_dest", "rank_source",
              "result", "resultlen", "size", "status", "subversion", "type_keyval",
              "valuelen", "version", "weighted", "inneighbors", "outneighbors"},
    "MPI_Aint *": {"address", "displacement", "extent", "lb", "size", "true_extent",
                   "true_lb", "position"},
    "MPI_Count *": {"count", "extent", "lb", "size", "true_extent", "true_lb"},
    "MPI_Comm *": {"comm", "newcomm", "new_comm", "newintercomm", "comm_cart",
                   "comm_graph", "comm_dist_graph"},
    "MPI_Datatype *": {"newtype", "type"},
    "MPI_Errhandler *": {"errhandler", "erhandler"},
    "MPI_Group *": {"group", "newgroup"},
    "MPI_Info *": {"info", "info_used", "newinfo"},
    "MPI_Message *": {"message"},
    "MPI_Op *": {"op"},
    "MPI_Request *": {"request"},
    "char *": {"comm_name", "type_name", "name", "string", "version", "value", "key"},
}


def null_class(t):
    """The error class of a NULL output pointer: a missing request is a
    request error, anything else an argument error."""
    return "MPI_ERR_REQUEST" if t.strip() == "MPI_Request *" else "MPI_ERR_ARG"


def checked(f):
    """Whether the call goes through the generated check layer: implemented
    calls returning an MPI error code (not MPI_T, whose codes are not error
    classes; not variadic, which cannot be forwarded)."""
    return (f.status == "impl" and f.ret == "int" and not f.name.startswith("MPI_T_")
            and "..." not in f.params)


def checks_of(f):
    """The checks of one call, in the order they run: (kind, type, name)."""
    typed = [param_name(p) for p in f.params]
    out = []
    if f.name not in CHECK_COMM_EXEMPT:
        out += [("comm", t, n) for t, n in typed
                if t.strip() == "MPI_Comm" and n in CHECK_COMM_NAMES]
    has_comm = any(k == "comm" for k, _, _ in out)
    for t, n in typed:
        ts = t.strip()
        if ts == "int" and n in CHECK_COUNT_NAMES:
            out.append(("count", t, n))
        elif ts == "MPI_Datatype" and n == "datatype" and has_comm \
                and f.chapter in CHECK_TYPE_CHAPTERS:
            out.append(("type", t, n))
        elif n in CHECK_OUT.get(ts, ()) and (f.name, n) not in CHECK_OUT_EXEMPT:
            out.append(("out", t, n))
    return out


# ---------------------------------------------------------------- MMDS
# The calls the MMDS times (mpi-shim/src/mmds.h): communication, blocking
# or not. A blocking call ends a computation interval and starts a
# communication-overhead one (the paper's section 5.1.1).
MDS_P2P = {"Bsend", "Ibsend", "Improbe", "Imrecv", "Iprobe", "Irecv", "Irsend", "Isend",
           "Isendrecv", "Isendrecv_replace",
           "Issend", "Mprobe", "Mrecv", "Probe", "Recv", "Rsend", "Send", "Sendrecv",
           "Sendrecv_replace", "Ssend", "Start", "Startall", "Test", "Testall", "Testany",
           "Testsome", "Wait", "Waitall", "Waitany", "Waitsome", "Cancel", "Request_get_status"}
MDS_P2P_BLOCKING = {"Bsend", "Mprobe", "Mrecv", "Probe", "Recv", "Rsend", "Send", "Sendrecv",
                    "Sendrecv_replace", "Ssend", "Wait", "Waitall", "Waitany", "Waitsome"}
MDS_COLL_EXCLUDED = {"Op_commutative", "Op_create", "Op_free", "Reduce_local"}
# (count, datatype) pairs whose product is the size a call is given.
MDS_SIZE_PARAMS = [("count", "datatype"), ("count", "type"), ("sendcount", "sendtype")]


def mds_kind(f):
    """None (not timed), "nb" or "block"."""
    if not checked(f):
        return None
    s = f.short
    if s.endswith("_init"):  # persistent: MPI_Start posts, and that is timed
        return None
    if f.chapter == "Point-to-point communication" and s in MDS_P2P:
        return "block" if s in MDS_P2P_BLOCKING else "nb"
    if f.chapter == "Collective operations" and s not in MDS_COLL_EXCLUDED:
        return "nb" if s.startswith("I") else "block"
    if s.startswith("Neighbor_"):
        return "block"
    if s.startswith("Ineighbor_"):
        return "nb"
    return None


def mds_size(f):
    names = [n for _, n in (param_name(p) for p in f.params)]
    for c, t in MDS_SIZE_PARAMS:
        if c in names and t in names:
            return f"bytes_of({c}, {t})"
    return "mmds::kNoSize"


def impl_decl(f):
    params = ", ".join(f.params) if f.params else "void"
    return f"int bcs_impl_{f.short}({params});"


def write_impl_header(funcs, path):
    out = [
        "// GENERATED by mpi-shim/api/mpigen.py from mpi-shim/api/mpi.api: do not edit.",
        "// The hand-written bodies of the implemented calls. The generated",
        "// PMPI_x (checks.cc) checks the arguments, then calls bcs_impl_x.",
        "#pragma once",
        "#include <mpi.h>",
        "",
        'extern "C" {',
    ]
    out += [impl_decl(f) for f in funcs if checked(f)]
    out.append('}  // extern "C"')
    write(path, "\n".join(out) + "\n")


def check_body(f, mds_id=None):
    typed = [param_name(p) for p in f.params]
    names = [n for _, n in typed]
    sig = ", ".join(f.params) if f.params else "void"
    lines = [f"BCS_PMPI_ALIAS({f.short})", f"int PMPI_{f.short}({sig}) {{"]
    cs = checks_of(f)
    if cs:
        fn = f'"{f.name}"'
        lines.append("  if (S().phase == Phase::running) {")
        first_comm = None
        for kind, t, n in cs:
            if kind == "comm":
                var = f"k_{n}"
                lines.append(f"    const int {var} = comm_index({n});")
                lines.append(f'    if ({var} == kNoComm) return arg_bad_comm({fn}, {n}, "{n}");')
                first_comm = first_comm or var
        where = first_comm or "kNoComm"
        for kind, t, n in cs:
            if kind == "count":
                lines.append(f"    if ({n} < 0) return arg_bad_count({where}, {fn}, {n}, \"{n}\");")
            elif kind == "type":
                # An empty message may name any datatype, even a null one.
                check = f"if (int e_ = check_usable({where}, {fn}, {n})) return e_;"
                lines.append(f"    if (count != 0) {{ {check} }}" if "count" in names
                             else f"    {check}")
            elif kind == "out":
                cls = null_class(t)
                lines.append(f"    if (!{n}) return arg_null({where}, {fn}, {cls}, \"{n}\");")
        lines.append("  }")
    call = f"bcs_impl_{f.short}({', '.join(names)})"
    if mds_id is not None:
        lines.append("  if (__builtin_expect(mmds::g_on, 0)) {")
        lines.append(f"    mmds::Call m_({mds_id}, {mds_size(f)});")
        lines.append(f"    return m_.done({call});")
        lines.append("  }")
    lines.append(f"  return {call};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_checks(funcs, path):
    out = [
        "// GENERATED by mpi-shim/api/mpigen.py from mpi-shim/api/mpi.api: do not edit.",
        "// The argument-check layer: every implemented call's PMPI_x (MPI_x a weak",
        "// alias) checks what its prototype says must hold (see CHECK_* in",
        "// mpigen.py), raising the error through the handler MPI says applies,",
        "// then runs the hand-written body bcs_impl_x. Checks run only between",
        "// MPI_Init and MPI_Finalize; outside, the body reports the phase.",
        "// Communication calls are timed by the MMDS when it records (mmds.h).",
        '#include "shim.h"',
        '#include "mmds.h"',
        "",
        "using namespace bcs::shim;",
        "",
    ]
    timed = [f for f in funcs if mds_kind(f)]
    ids = {f.name: i for i, f in enumerate(timed)}
    out.append("namespace bcs::shim {")
    out.append("const char* const bcs_mds_names[] = {")
    out += [f'    "{f.name}",' for f in timed]
    out.append("};")
    out.append("const bool bcs_mds_blocking[] = {")
    out += [f"    {'true' if mds_kind(f) == 'block' else 'false'},  // {f.name}" for f in timed]
    out.append("};")
    out.append("const bool bcs_mds_sized[] = {")
    out += [f"    {'false' if mds_size(f) == 'mmds::kNoSize' else 'true'},  // {f.name}" for f in timed]
    out.append("};")
    out.append(f"const int bcs_mds_count = {len(timed)};")
    out.append("}  // namespace bcs::shim")
    out.append("")
    out.append('extern "C" {')
    out += [check_body(f, ids.get(f.name)) for f in funcs if checked(f)]
    out.append('}  // extern "C"')
    write(path, "\n".join(out) + "\n")


def write_check_test(funcs, path):
    """A C program that breaks each generated check once, with every other
    argument valid, and expects the check's error class: an invalid
    communicator, a negative count, an uncommitted-or-null datatype, a NULL
    output pointer. The bodies never run (the check comes first), so the
    other arguments need only pass the checks."""
    out = [
        "/* GENERATED by mpi-shim/api/mpigen.py from mpi-shim/api/mpi.api: do not edit. */",
        "#include <mpi.h>",
        "#include <stdio.h>",
        "",
        "static int failed, called;",
        "static long long scratch[1024];",
        "static void expect(const char *fn, const char *what, int want, int rc) {",
        "  ++called;",
        "  if (rc != want) {",
        '    fprintf(stderr, "%s with %s returned %d, expected %d\\n", fn, what, rc, want);',
        "    ++failed;",
        "  }",
        "}",
        "",
        "int main(int argc, char **argv) {",
        "  MPI_Init(&argc, &argv);",
        "  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);",
    ]

    def args(f, broken):
        out_args = []
        for t, n in (param_name(p) for p in f.params):
            ts = t.strip()
            if (t, n) == broken[1:]:
                out_args.append({"comm": "MPI_COMM_NULL", "count": "-1",
                                 "type": "MPI_DATATYPE_NULL", "out": "NULL"}[broken[0]])
            elif ts == "int" and n == "count" and broken[0] == "type":
                out_args.append("1")  # with count 0 any datatype passes
            elif ts == "MPI_Comm":
                out_args.append("MPI_COMM_WORLD")
            elif ts == "MPI_Datatype":
                out_args.append("MPI_INT")
            elif ts == "MPI_Op":
                out_args.append("MPI_SUM")
            elif ts == "MPI_Info":
                out_args.append("MPI_INFO_NULL")
            elif "function" in ts or ts.endswith("_fn *"):
                out_args.append("0")
            elif "*" in ts or "[" in ts:
                out_args.append("(void *)scratch")
            else:
                out_args.append("0")
        return ", ".join(out_args)

    classes = {"comm": "MPI_ERR_COMM", "count": "MPI_ERR_COUNT", "type": "MPI_ERR_TYPE",
               "out": "MPI_ERR_ARG"}
    for f in funcs:
        if not checked(f):
            continue
        for c in checks_of(f):
            what = f"{c[0]} argument {c[2]}"
            want = null_class(c[1]) if c[0] == "out" else classes[c[0]]
            out.append(f'  expect("{f.name}", "{what}", {want}, '
                       f"{f.name}({args(f, c)}));")
    out += [
        '  printf("%d argument checks raised their error class, %d did not\\n",',
        "         called - failed, failed);",
        "  MPI_Finalize();",
        "  return failed != 0;",
        "}",
    ]
    write(path, "\n".join(out) + "\n")


def write_header(funcs, template, path):
    text = open(template, encoding="utf-8").read()
    chapters, mpi, pmpi = [], [], []
    for f in funcs:
        if f.chapter not in chapters:
            chapters.append(f.chapter)
    for c in chapters:
        mpi.append(f"/* {c} */")
        pmpi.append(f"/* {c} */")
        for f in funcs:
            if f.chapter == c:
                mpi.append(f.decl())
                pmpi.append(f.decl("P"))
        mpi.append("")
        pmpi.append("")
    text = text.replace("@BCS_MPI_FUNCTIONS@", "\n".join(mpi).rstrip())
    text = text.replace("@BCS_PMPI_FUNCTIONS@", "\n".join(pmpi).rstrip())
    if "@BCS_" in text:
        sys.exit(f"{template}: unreplaced marker")
    write(path, text)


# Functions of later MPI versions that mpi.api lists (in their chapters).
MPI4_ADDED = {"MPI_Isendrecv", "MPI_Isendrecv_replace", "MPI_Comm_idup_with_info",
              "MPI_Info_get_string", "MPI_Info_create_env"} | {
    f"MPI_{c}_init" for c in (
        "Allgather", "Allgatherv", "Allreduce", "Alltoall", "Alltoallv", "Alltoallw", "Barrier",
        "Bcast", "Exscan", "Gather", "Gatherv", "Reduce", "Reduce_scatter",
        "Reduce_scatter_block", "Scan", "Scatter", "Scatterv", "Neighbor_allgather",
        "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv", "Neighbor_alltoallw")}
MPI41_ADDED = {"MPI_Buffer_flush", "MPI_Buffer_iflush"}


def write_coverage(funcs, path):
    chapters = []
    for f in funcs:
        if f.chapter not in chapters:
            chapters.append(f.chapter)
    total = len(funcs)
    impl = sum(f.status == "impl" for f in funcs)
    out = [
        "# MPI-3.1 coverage",
        "",
        "Generated from `mpi-shim/api/mpi.api` by `mpi-shim/api/mpigen.py`",
        "(`cmake --build build --target mpi-coverage` rewrites this file; the",
        "`mpi_coverage_current` test fails when it is out of date).",
        "",
        "Every function of the MPI-3.1 C interface is declared in `mpi.h`, with its",
        "`PMPI_` name, and links. A function marked *not yet* raises",
        "`MPI_ERR_UNSUPPORTED_OPERATION` with a message naming the call, through the",
        "communicator's error handler (the default one aborts the job naming rank",
        "and call); file calls return that error, as MPI's default file error",
        "handler is `MPI_ERRORS_RETURN`.",
        "",
        "Beyond MPI-3.1 (`MPI_VERSION` stays 3): " +
        ", ".join(f"`{n}`" for n in sorted(MPI4_ADDED)) + " from MPI-4.0; " +
        ", ".join(f"`{n}`" for n in sorted(MPI41_ADDED)) + " from MPI-4.1.",
        "",
        f"**{impl} of {total} functions implemented.**",
        "",
        "| chapter | implemented | of |",
        "|---|---|---|",
    ]
    for c in chapters:
        fs = [f for f in funcs if f.chapter == c]
        out.append(f"| {c} | {sum(f.status == 'impl' for f in fs)} | {len(fs)} |")
    for c in chapters:
        out += ["", f"## {c}", ""]
        out.append("| function | status |")
        out.append("|---|---|")
        for f in funcs:
            if f.chapter == c:
                out.append(f"| `{f.name}` | {'yes' if f.status == 'impl' else 'not yet'} |")
    write(path, "\n".join(out) + "\n")


def write(path, text):
    # Rewrite only on change, so dependants are not rebuilt needlessly.
    try:
        if open(path, encoding="utf-8").read() == text:
            return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", required=True)
    ap.add_argument("--template")
    ap.add_argument("--header")
    ap.add_argument("--stubs")
    ap.add_argument("--coverage")
    ap.add_argument("--stub-test")
    ap.add_argument("--checks")
    ap.add_argument("--impl-header")
    ap.add_argument("--check-test")
    a = ap.parse_args()
    funcs = read_api(a.api)
    if a.header:
        write_header(funcs, a.template, a.header)
    if a.stubs:
        write_stubs(funcs, a.stubs)
    if a.coverage:
        write_coverage(funcs, a.coverage)
    if a.stub_test:
        write_stub_test(funcs, a.stub_test)
    if a.checks:
        write_checks(funcs, a.checks)
    if a.impl_header:
        write_impl_header(funcs, a.impl_header)
    if a.check_test:
        write_check_test(funcs, a.check_test)


if __name__ == "__main__":
    main()
