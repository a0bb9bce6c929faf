#!/bin/sh
# The drawn house: checks the layering of hipress from the code's own
# #include "x.h" lines, without a build.  Run by `make check` (tests/lint/docs.mk)
# with HP_SRCDIR set, or from the source tree as tests/lint/check_layers.sh.
#
# Every .c/.h/.def (and .cu) file under src/, include/, mpi_wrappers/ and
# cuda/ is a node; its layer is the folder of the LAYERS table below that
# holds it.  An include resolves as the compiler would: the includer's own
# folder first, then the include path (the layers' folders of src/,
# include/, cuda/'s folders).  Checks:
#  (a) no arrow up: a file includes only its own layer and the layers the
#      LAYERS table lets it include (src/ is core < ops < comp < transport
#      < backend < algo < plan < drive < the front ends, src/front/mpi and
#      src/front/nccl, neither of which sees the other; mpi_wrappers/ above
#      them; cuda/, the device module, sees core, ops, comp and backend
#      only; src/tools/, the programs, everything);
#  (b) no include cycle among files, none among modules (a .c with the .h
#      of the same name: x.c including y.h while y.h includes x.h is a
#      circle between x and y), none among layers;
#  (c) no hand-written C, C++ or CUDA file (.c .h .cc .cpp .cxx .hpp .cu
#      .cuh .def .inc) under src/, include/, mpi_wrappers/, cuda/, tests/
#      or scripts/ over 700 lines.  Generated data files are exempt only
#      by name in SIZE_GENERATED below, and each must say `generated` in
#      its first 5 lines; a file on SIZE_PENDING (its split under way on
#      another branch) is reported as pending, not failed, and
#      HP_LAYERS_SIZE_ONLY_WARN=1 reports every file over the limit that
#      way (for a local run in the middle of a split);
#  (d) every .c/.h under src/ opens with a comment (a /* in its first 3
#      lines) saying its job;
#  (e) the MPI layer stays apart (doc/dev/architecture.md, "Two
#      libraries"): no file of the NCCL-only library -- one of
#      libhpbase_la_SOURCES, libhipress_nccl_la_SOURCES or
#      HP_NCCL_FRONT_SOURCES in Makefile.am and the library's fragments --
#      includes <mpi.h> or <hwloc.h> or reaches a header of
#      libhpcore_la_SOURCES through its includes;
#  (f) the entry layer only interposes: a file of mpi_wrappers/ includes
#      the front ends' entry headers, the table of the real NCCL functions
#      and the core's status and log header (ENTRY_INCLUDES below), and
#      system headers (<mpi.h>, <nccl.h>, libc's); never another header of
#      hipress, by either spelling (a backend's, a compressor's, the
#      device module's, the process state's or the group tracking's);
#  and no two files of the include path share a name (which one an include
#  finds would hang on the -I order).  What the built objects use of each
#  other's names (calls and data, not includes) is tests/lint/check_names.sh.
# Each violation prints as `check_layers: <file>: <what>`, a pending file the
# same way, then a summary.  Exit 0 when there are no violations, 1
# otherwise.
#   --dot     the layer graph (includer -> included, with edge counts) in
#             Graphviz dot; arrows up in red.  Exit 0.
#   --report  per layer: its files with line counts, and the includes that
#             did not resolve (generated headers such as config.h).  Exit 0.
#   --table   the LAYERS table, one row a layer, bottom to top: its name,
#             its folder, a colon, the layers it may use (what
#             check_names.sh reads).  Exit 0.
set -u

usage() {
    echo "usage: $0 [--dot | --report | --table]   (HP_SRCDIR: the source tree)"
}

mode=check
for arg in "$@"; do
    case $arg in
        --dot) mode=dot ;;
        --report) mode=report ;;
        --table) mode=table ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

# The layers, bottom to top: each its name, its folder, a colon, the other
# layers it may include.  include/ is the public API and plugin ABI, below
# everything.  (What mpi_wrappers/ may include is narrower still: (f).)
LAYERS='
include include:
core src/core: include
ops src/ops: include core
comp src/comp: include core ops
transport src/transport: include core ops comp
backend src/backend: include core ops comp transport
algo src/algo: include core ops comp transport backend
plan src/plan: include core ops comp transport backend algo
drive src/drive: include core ops comp transport backend algo plan
front_mpi src/front/mpi: include core ops comp transport backend algo plan drive
front_nccl src/front/nccl: include core ops comp transport backend algo plan drive
mpi_wrappers mpi_wrappers: include core ops comp transport backend algo plan drive front_mpi front_nccl
cuda cuda: include core ops comp backend
tools src/tools: include core ops comp transport backend algo plan drive front_mpi front_nccl mpi_wrappers cuda
'
# (f) The entry layer and the headers of hipress it may include.
ENTRY_LAYER=mpi_wrappers
ENTRY_INCLUDES='hp_mpi_entry.h hp_nccl_entry.h hp_nccl_real.h hp_core.h'

# (c) The most lines of a hand-written C, C++ or CUDA file, and the
# extensions and folders that rule covers.
MAX_LINES=700
SIZE_EXTS='c h cc cpp cxx hpp cu cuh def inc'
SIZE_DIRS='src include mpi_wrappers cuda tests scripts'
# Generated data files exempt from MAX_LINES, one path a line; each must say
# `generated` in its first 5 lines.  None today.
SIZE_GENERATED=''
# Files over MAX_LINES whose split is under way on another branch: reported
# as pending, not failed.  A file comes off this list when it is split (the
# check says so once it is under the limit).
SIZE_PENDING='
'

if [ "$mode" = table ]; then
    echo "$LAYERS" | grep .
    exit 0
fi

here=$(cd "$(dirname "$0")" && pwd) || exit 1
src=${HP_SRCDIR:-$(cd "$here/../.." && pwd)}
if [ ! -d "$src/src" ]; then
    echo "check_layers: $src/src: no such folder (set HP_SRCDIR to the source tree)" >&2
    exit 1
fi
cd "$src" || exit 1

files=$(find src include mpi_wrappers cuda -type f \
            \( -name '*.c' -o -name '*.h' -o -name '*.def' -o -name '*.cu' \) \
            2>/dev/null | LC_ALL=C sort)
if [ -z "$files" ]; then
    echo "check_layers: no source files under $src" >&2
    exit 1
fi
HP_LAYER_FILES=$files
HP_LAYER_TABLE=$LAYERS

# (c) "lines path" of every file the size rule covers, and the generated
# files that do not say so.
size_find=
for e in $SIZE_EXTS; do
    size_find="$size_find${size_find:+ -o} -name *.$e"
done
# shellcheck disable=SC2086 # size_find: find's own words, unquoted on purpose
size_files=$(set -f; find $SIZE_DIRS -type f \( $size_find \) 2>/dev/null | LC_ALL=C sort)
# shellcheck disable=SC2086 # the file names carry no blanks (find above)
HP_SIZE_LINES=$(wc -l $size_files 2>/dev/null | awk '$2 != "total" || NF != 2 { print $1, $2 }')
HP_SIZE_UNMARKED=
for g in $SIZE_GENERATED; do
    if [ ! -f "$g" ] || ! head -n 5 "$g" | grep -q generated; then
        HP_SIZE_UNMARKED="$HP_SIZE_UNMARKED $g"
    fi
done
HP_SIZE_GENERATED=$SIZE_GENERATED
HP_SIZE_PENDING=$SIZE_PENDING
export HP_SIZE_LINES HP_SIZE_UNMARKED HP_SIZE_GENERATED HP_SIZE_PENDING
# The files a make variable names in these makefiles (its = and += lines,
# with their continuations; $(...) references left out).
mk_list() {
    var=$1
    shift
    awk -v v="$var" '
        !on && $1 == v && ($2 == "=" || $2 == "+=") { on = 1; $1 = ""; $2 = "" }
        on { line = $0; cont = sub(/\\[ \t]*$/, "", line); n = split(line, w, /[ \t]+/)
             for (i = 1; i <= n; i++) if (w[i] != "" && substr(w[i], 1, 1) != "$") print w[i]
             if (!cont) on = 0 }' "$@" 2>/dev/null
}
# the library's makefiles: Makefile.am and the fragments of its folders
mk_files=$(find src mpi_wrappers cuda -name '*.mk' 2>/dev/null | LC_ALL=C sort)
# shellcheck disable=SC2086 # the file names carry no blanks
HP_MPI_FILES=$(mk_list libhpcore_la_SOURCES Makefile.am $mk_files)
# shellcheck disable=SC2086
HP_NCCL_LIB_FILES=$(for v in libhpbase_la_SOURCES libhipress_nccl_la_SOURCES HP_NCCL_FRONT_SOURCES; do
    mk_list $v Makefile.am $mk_files
done)
HP_ENTRY_INCLUDES=$ENTRY_INCLUDES
export HP_LAYER_FILES HP_LAYER_TABLE HP_MPI_FILES HP_NCCL_LIB_FILES HP_ENTRY_INCLUDES

graph_awk=$(cat "$here/graph.awk") || exit 1

# shellcheck disable=SC2086 # the file names carry no blanks (find above)
LC_ALL=C awk -v mode="$mode" -v entry_layer="$ENTRY_LAYER" -v max_lines="$MAX_LINES" \
    -v size_warn="${HP_LAYERS_SIZE_ONLY_WARN:-0}" "$graph_awk"'
function violation(file, what) {
    nviol++
    print "check_layers: " file ": " what
}

# Reported, not failed.
function pending(file, what) {
    npend++
    print "check_layers: " file ": " what
}

# The layer of a path: the layer whose folder holds it, the deepest such
# ("?" outside every layer folder).
function layer_of(path,   a, best, dir) {
    best = "?"
    for (a = 1; a <= LN; a++) {
        dir = lfolder[lname[a]]
        if (substr(path, 1, length(dir) + 1) == dir "/" && (best == "?" || length(dir) > length(lfolder[best])))
            best = lname[a]
    }
    return best
}

function dir_of(path,   i) {
    for (i = length(path); i > 0 && substr(path, i, 1) != "/"; i--) ;
    return substr(path, 1, i - 1)
}

function base_of(path,   i) {
    for (i = length(path); i > 0 && substr(path, i, 1) != "/"; i--) ;
    return substr(path, i + 1)
}

function stem_of(path,   i) {
    for (i = length(path); i > 0 && substr(path, i, 1) != "." && substr(path, i, 1) != "/"; i--) ;
    return (i > 0 && substr(path, i, 1) == ".") ? substr(path, 1, i - 1) : path
}

# On the include path (what another folder can reach by name): every
# layer folder except that of the programs.
function on_path(path,   l) {
    l = layer_of(path)
    return l != "?" && l != "tools"
}

BEGIN {
    nviol = 0
    # The layer table: LN layers in order, lfolder[], rank[], may[l, m].
    nl = split(ENVIRON["HP_LAYER_TABLE"], rows, "\n")
    LN = 0
    for (i = 1; i <= nl; i++) {
        if (rows[i] !~ /:/) continue
        split(substr(rows[i], 1, index(rows[i], ":") - 1), tmp, " ")
        l = tmp[1]
        LN++; lname[LN] = l; rank[l] = LN; lfolder[l] = tmp[2]
        allowed_text[l] = substr(rows[i], index(rows[i], ":") + 1)
        k = split(allowed_text[l], tmp, " ")
        for (j = 1; j <= k; j++) may[l, tmp[j]] = 1
        may[l, l] = 1
    }
    N = split(ENVIRON["HP_LAYER_FILES"], fname, "\n")
    for (i = 1; i <= N; i++) {
        id[fname[i]] = i
        flayer[i] = layer_of(fname[i])
        nlines[i] = 0
        ocstate[i] = 0   # opening comment: 0 not seen, 1 inside, 2 done
    }
}

{
    f = id[FILENAME]
    nlines[f] = FNR
    if (ocstate[f] == 0 && FNR <= 3 && index($0, "/*") > 0) {
        ocstate[f] = 1
        line = substr($0, index($0, "/*") + 2)
    } else {
        line = $0
    }
    if (ocstate[f] == 1) {
        if (index(line, "*/") > 0) ocstate[f] = 2
    }
    if ($0 ~ /^[ \t]*#[ \t]*include[ \t]*<(mpi|hwloc)\.h>/) sys_mpi[f] = ($0 ~ /hwloc/) ? "<hwloc.h>" : "<mpi.h>"
    if ($0 ~ /^[ \t]*#[ \t]*include[ \t]*</ && flayer[f] == entry_layer) {
        s = substr($0, index($0, "<") + 1)
        if (index(s, ">") > 1) { nainc[f]++; ainc[f, nainc[f]] = substr(s, 1, index(s, ">") - 1) }
    }
    if ($0 ~ /^[ \t]*#[ \t]*include[ \t]*"/) {
        s = substr($0, index($0, "\"") + 1)
        if (index(s, "\"") > 1) {
            s = substr(s, 1, index(s, "\"") - 1)
            ninc[f]++
            inc[f, ninc[f]] = s
        }
    }
}

END {
    # Names on the include path; two files of one name are a hazard.
    for (i = 1; i <= N; i++) {
        if (!on_path(fname[i])) continue
        b = base_of(fname[i])
        if (b in byname) {
            violation(fname[i], "has the name of " fname[byname[b]] " (both on the include path)")
            if (rank[flayer[i]] < rank[flayer[byname[b]]]) byname[b] = i
        } else {
            byname[b] = i
        }
    }

    # Resolve the includes into file edges (each pair once).
    E = 0; nunres = 0
    for (i = 1; i <= N; i++) {
        fdir = dir_of(fname[i])
        for (k = 1; k <= ninc[i]; k++) {
            name = inc[i, k]
            t = 0
            if ((fdir "/" name) in id) t = id[fdir "/" name]
            else if (name in id) t = id[name]
            else if (base_of(name) in byname && index(name, "/") == 0) t = byname[name]
            if (!t) {
                if (!((i, name) in unres)) { unres[i, name] = 1; nunres++; unres_list[nunres] = fname[i] ": " name }
                continue
            }
            if ((i, t) in edge) continue
            edge[i, t] = 1; E++
            fdeg[i]++; fadj[i, fdeg[i]] = t
            lf = flayer[i]; lt = flayer[t]
            lcount[lf, lt]++
            # (a) arrows up
            if (lf == "?" || lt == "?") continue
            if (!((lf, lt) in may)) {
                if (rank[lt] > rank[lf])
                    violation(fname[i], "includes " fname[t] ": an arrow up (" lf " -> " lt ")")
                else
                    violation(fname[i], "includes " fname[t] ": " lf " may include only" allowed_text[lf] " (and " lf ")")
            }
        }
    }

    if (mode == "dot") {
        print "digraph hipress_layers {"
        print "  // includer -> included; red: an arrow up (or a layer not allowed)"
        print "  node [shape=box];"
        for (a = 1; a <= LN; a++) {
            nf = 0; for (i = 1; i <= N; i++) if (flayer[i] == lname[a]) nf++
            if (nf == 0) continue
            printf "  \"%s\" [label=\"%s\\n%d files, %d own includes\"];\n", lname[a], lname[a], nf, lcount[lname[a], lname[a]] + 0
            if (prev != "") printf "  \"%s\" -> \"%s\" [style=invis];\n", lname[a], prev
            prev = lname[a]
        }
        for (a = 1; a <= LN; a++) for (b = 1; b <= LN; b++) {
            if (a == b || !((lname[a], lname[b]) in lcount)) continue
            if ((lname[a], lname[b]) in may)
                printf "  \"%s\" -> \"%s\" [label=\"%d\"];\n", lname[a], lname[b], lcount[lname[a], lname[b]]
            else
                printf "  \"%s\" -> \"%s\" [label=\"%d\", color=red, fontcolor=red, constraint=false];\n", lname[a], lname[b], lcount[lname[a], lname[b]]
        }
        print "}"
        exit 0
    }
    if (mode == "report") {
        for (a = 1; a <= LN + 1; a++) {
            l = (a <= LN) ? lname[a] : "?"
            nf = 0; tot = 0
            for (i = 1; i <= N; i++) if (flayer[i] == l) { nf++; tot += nlines[i] }
            if (nf == 0) continue
            if (l == "?") printf "(outside a layer folder): %d files, %d lines\n", nf, tot
            else printf "%s: %d files, %d lines; may include:%s\n", l, nf, tot, (allowed_text[l] == "" ? " (its own files only)" : allowed_text[l])
            for (i = 1; i <= N; i++) if (flayer[i] == l) printf "  %5d  %s%s\n", nlines[i], fname[i], (nlines[i] > max_lines + 0) ? "  (over " max_lines ")" : ""
        }
        if (nunres) {
            print "unresolved includes (generated or outside the tree):"
            for (k = 1; k <= nunres; k++) print "  " unres_list[k]
        }
        exit 0
    }

    # (b) cycles among files
    closure(N, fdeg, fadj, freach)
    components(N, freach, fcomp, fcsize)
    for (i = 1; i <= N; i++) {
        if (fcomp[i] != i || !((i, i) in freach)) continue
        in_file_cycle[i] = 1
        violation(fname[i], "include cycle: " cycle_path(i, fdeg, fadj, fcomp, fname))
    }
    for (i = 1; i <= N; i++) if (fcomp[fcomp[i]] in in_file_cycle) file_cyclic[i] = 1

    # (b) cycles among modules (x.c + x.h); edges labelled by the files
    M = 0
    for (i = 1; i <= N; i++) {
        s = stem_of(fname[i])
        if (!(s in mid)) { mid[s] = ++M; mname[M] = s }
        fmod[i] = mid[s]
    }
    for (i = 1; i <= N; i++) for (k = 1; k <= fdeg[i]; k++) {
        t = fadj[i, k]; a = fmod[i]; b = fmod[t]
        if (a == b || ((a, b) in medge)) continue
        medge[a, b] = fname[i] " -> " fname[t]
        mdeg[a]++; madj[a, mdeg[a]] = b
    }
    closure(M, mdeg, madj, mreach)
    components(M, mreach, mcomp, mcsize)
    for (a = 1; a <= M; a++) {
        if (mcomp[a] != a || mcsize[a] < 2) continue
        # a module circle whose every module holds a file of a file circle
        # is that file circle, reported above
        split("", cyclic_mod)
        for (i = 1; i <= N; i++) if (i in file_cyclic) cyclic_mod[fmod[i]] = 1
        only_files = 1
        for (b = 1; b <= M; b++) if (mcomp[b] == a && !(b in cyclic_mod)) only_files = 0
        if (only_files) continue
        p = cycle_path(a, mdeg, madj, mcomp, mname)
        n = split(p, steps, " -> ")
        how = ""
        for (k = 1; k < n; k++) how = how (k > 1 ? ", " : "") medge[mid[steps[k]], mid[steps[k + 1]]]
        members = ""
        if (mcsize[a] > 2)
            for (b = 1; b <= M; b++) if (mcomp[b] == a) members = members " " mname[b]
        violation(mname[a], "module cycle" (members == "" ? "" : " among" members ", e.g.") ": " p " (" how ")")
    }

    # (e) the NCCL-only library reaches nothing of the MPI layer
    nm = split(ENVIRON["HP_MPI_FILES"], tmp, "\n")
    for (k = 1; k <= nm; k++) if (tmp[k] in id) is_mpi[id[tmp[k]]] = 1
    nn = split(ENVIRON["HP_NCCL_LIB_FILES"], tmp, "\n")
    for (k = 1; k <= nn; k++) if (tmp[k] in id) is_nccl_lib[id[tmp[k]]] = 1
    if (nm > 0) {
        for (i = 1; i <= N; i++) {
            if (!(i in is_nccl_lib)) continue
            if (i in sys_mpi)
                violation(fname[i], "includes " sys_mpi[i] " (a file of libhipress_nccl.so: the MPI layer is libhpcore_la_SOURCES)")
            for (t = 1; t <= N; t++)
                if ((t in is_mpi) && fname[t] ~ /\.h$/ && ((i, t) in freach))
                    violation(fname[i], "reaches " fname[t] " (the MPI layer, libhpcore_la_SOURCES) through its includes; libhipress_nccl.so must not")
        }
    }

    # (b) cycles among layers
    for (a = 1; a <= LN; a++) for (b = 1; b <= LN; b++)
        if (a != b && ((lname[a], lname[b]) in lcount)) { ldeg[a]++; ladj[a, ldeg[a]] = b }
    closure(LN, ldeg, ladj, lreach)
    components(LN, lreach, lcomp, lcsize)
    for (a = 1; a <= LN; a++) {
        if (lcomp[a] != a || lcsize[a] < 2) continue
        p = cycle_path(a, ldeg, ladj, lcomp, lname)
        members = ""
        for (b = 1; b <= LN; b++) if (lcomp[b] == a) members = members " " lname[b]
        violation(lfolder[lname[a]], "layer cycle among" members ", e.g. " p)
    }

    # (f) the entry layer includes the entry headers only
    ne = split(ENVIRON["HP_ENTRY_INCLUDES"], tmp, " ")
    for (k = 1; k <= ne; k++) entry_ok[tmp[k]] = 1
    for (i = 1; i <= N; i++) {
        if (flayer[i] != entry_layer) continue
        for (k = 1; k <= ninc[i]; k++)
            if (!(base_of(inc[i, k]) in entry_ok))
                violation(fname[i], "includes \"" inc[i, k] "\": the entry layer includes of hipress only " ENVIRON["HP_ENTRY_INCLUDES"])
        for (k = 1; k <= nainc[i]; k++)
            if (base_of(ainc[i, k]) in byname && !(base_of(ainc[i, k]) in entry_ok))
                violation(fname[i], "includes <" ainc[i, k] ">, a header of hipress: the entry layer includes of hipress only " ENVIRON["HP_ENTRY_INCLUDES"])
    }

    # (d) and files outside a layer folder
    for (i = 1; i <= N; i++) {
        if (substr(fname[i], 1, 4) != "src/") continue
        if (flayer[i] == "?")
            violation(fname[i], "not in a layer folder (the LAYERS table names every folder of src/)")
        if (fname[i] ~ /\.[ch]$/ && ocstate[i] == 0)
            violation(fname[i], "no opening comment (a /* in its first 3 lines) saying its job")
    }

    # (c) the size of every hand-written C, C++ and CUDA file
    nsz = split(ENVIRON["HP_SIZE_GENERATED"], tmp, /[ \t\n]+/)
    for (k = 1; k <= nsz; k++) if (tmp[k] != "") is_generated[tmp[k]] = 1
    nsz = split(ENVIRON["HP_SIZE_UNMARKED"], tmp, /[ \t\n]+/)
    for (k = 1; k <= nsz; k++)
        if (tmp[k] != "") violation(tmp[k], "on SIZE_GENERATED, but missing or not saying `generated` in its first 5 lines")
    nsz = split(ENVIRON["HP_SIZE_PENDING"], tmp, /[ \t\n]+/)
    for (k = 1; k <= nsz; k++) if (tmp[k] != "") is_pending[tmp[k]] = 1
    nsz = split(ENVIRON["HP_SIZE_LINES"], tmp, "\n")
    nsized = 0
    for (k = 1; k <= nsz; k++) {
        if (split(tmp[k], w, " ") != 2) continue
        nsized++; sized[w[2]] = 1
        if (w[2] in is_generated) continue
        if (w[1] + 0 <= max_lines + 0) {
            if (w[2] in is_pending)
                pending(w[2], w[1] " lines: under " max_lines " now, take it off SIZE_PENDING")
            continue
        }
        if (w[2] in is_pending)
            pending(w[2], w[1] " lines, over " max_lines " (pending: on SIZE_PENDING)")
        else if (size_warn + 0)
            pending(w[2], w[1] " lines, over " max_lines " (reported only: HP_LAYERS_SIZE_ONLY_WARN)")
        else
            violation(w[2], w[1] " lines, over " max_lines)
    }
    for (f in is_pending)
        if (!(f in sized)) pending(f, "no such file: take it off SIZE_PENDING")

    printf "check_layers: %d files, %d include edges, %d files sized, %d violations, %d pending\n", N, E, nsized, nviol, npend + 0
    exit (nviol > 0) ? 1 : 0
}
' $files
