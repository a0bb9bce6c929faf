#!/bin/sh
# The drawn house, by names: checks the layering of hipress from what the
# built objects use of each other -- functions and data, whether or not an
# include shows it (a local prototype, an extern, a macro) -- with nm.  Run
# by `make check` after the build (tests/lint/docs.mk; HP_SRCDIR and
# HP_BUILDDIR set), or by hand:
#     HP_BUILDDIR=_build tests/lint/check_names.sh
#
# Every object file under a layer's folder of the build tree (src/<layer>/,
# mpi_wrappers/, cuda/, src/tools/, their .libs/) is read as the source file it was
# compiled from: the same folder of the source tree, the object's name less
# automake's per-target prefix (`libhipress_la-hp_x.o` is hp_x.c, or .cu,
# .cc, .cpp, .cxx).  An object older than its source (a target no longer
# built) is left out.  A file uses a name when its object has it undefined
# (nm U, w, v) and another file's object defines it (a global symbol); names
# the implementation reserves (__x, _GLOBAL_x, DW.ref.x) are left out, and
# so is a name the file defines itself.  Checks, on the layers of
# tests/lint/check_layers.sh (its LAYERS table, read with --table):
#  (a) no arrow up: a file uses only names defined in its own layer and in
#      the layers its row lets it use (nothing in src/ uses a name of cuda/;
#      cuda/ only core, ops, comp and backend);
#  (b) no circle of names among files: two files that use each other's
#      names, or a longer circle (a -> b -> c -> a).  The way out is to
#      move what both need into one place, so that the uses run one way.
# A name defined by more than one file (two builds of one interface, such
# as the device kernels and their host emulation) counts as used from each.
# Each violation prints as `check_names: <file>: <what>`, then a summary.
# A violation whose files are all on NAMES_PENDING below prints the same
# way, marked pending, and does not fail.  Exit 0 when there are no
# violations, 1 otherwise (also when no object is found: build first).
#   --edges   every use, one a line: `file -> file: name`.  Exit 0.
# Environment: HP_SRCDIR (the source tree; default: two folders above this
# script), HP_BUILDDIR (the build tree; default: the current folder), HP_NM
# (nm), HP_NAMES_PENDING (replaces NAMES_PENDING: the self-test,
# tests/lint/check_names_selftest.sh, uses it).
set -u

usage() {
    echo "usage: $0 [--edges]   (HP_SRCDIR: the source tree, HP_BUILDDIR: the build tree)"
}

mode=check
for arg in "$@"; do
    case $arg in
        --edges) mode=edges ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

# Files in a circle of names or an arrow up that are another branch's to
# fix: reported as pending, not failed, while every file of a violation is
# here.  Each group is a registry that names its rows while the rows call
# back into it; the fix is the owner's (a table file above both, or the
# shared helpers in a file below both).
NAMES_PENDING='
'

here=$(cd "$(dirname "$0")" && pwd) || exit 1
src=${HP_SRCDIR:-$(cd "$here/../.." && pwd)}
build=${HP_BUILDDIR:-$(pwd)}
nm=${HP_NM:-nm}
src=$(cd "$src" && pwd) || exit 1
build=$(cd "$build" && pwd) || exit 1

table=$("$here/check_layers.sh" --table) || {
    echo "check_names: $here/check_layers.sh --table failed" >&2
    exit 1
}

# The objects of the layers' folders, each with its source file:
# "object source" lines.
map=$(cd "$build" && echo "$table" | while read -r _layer folder _rest; do
    folder=${folder%:}
    [ -d "$folder" ] || continue
    find "$folder" -name '*.o' -type f
done | LC_ALL=C sort | while read -r obj; do
    dir=${obj%/*}
    dir=${dir%/.libs}
    base=${obj##*/}
    base=${base%.o}
    s=
    for stem in "$base" "${base#*-}"; do
        for ext in c cu cc cpp cxx; do
            if [ -f "$src/$dir/$stem.$ext" ]; then
                s=$dir/$stem.$ext
                break 2
            fi
        done
    done
    [ -n "$s" ] || continue
    [ -n "$(find "$src/$s" -newer "$obj")" ] && continue
    echo "$obj $s"
done)

if [ -z "$map" ]; then
    echo "check_names: no object of a layer folder under $build (build first, or set HP_BUILDDIR)" >&2
    exit 1
fi

syms=$(mktemp "${TMPDIR:-/tmp}/check_names.XXXXXX") || exit 1
trap 'rm -f "$syms"' EXIT
# shellcheck disable=SC2046 # the object names carry no blanks
(cd "$build" && "$nm" -P -A $(echo "$map" | awk '{ print $1 }')) >"$syms" || {
    echo "check_names: $nm failed in $build" >&2
    exit 1
}

HP_NAMES_TABLE=$table
HP_NAMES_MAP=$map
HP_NAMES_PENDING=${HP_NAMES_PENDING-$NAMES_PENDING}
export HP_NAMES_TABLE HP_NAMES_MAP HP_NAMES_PENDING

graph_awk=$(cat "$here/graph.awk") || exit 1

LC_ALL=C awk -v mode="$mode" "$graph_awk"'
function violation(files, file, what,   n, k, f, all) {
    n = split(files, f, " ")
    all = 1
    for (k = 1; k <= n; k++) if (!(f[k] in is_pending)) all = 0
    if (all) {
        npend++
        print "check_names: " file ": " what " (pending: on NAMES_PENDING)"
        for (k = 1; k <= n; k++) pending_used[f[k]] = 1
    }
    else { nviol++; print "check_names: " file ": " what }
}

# "a, b and 3 more": the first names of a list of names.
function some(list,   n, w, s, k) {
    n = split(list, w, " ")
    s = w[1]
    for (k = 2; k <= n && k <= 4; k++) s = s ", " w[k]
    if (n > 4) s = s " and " (n - 4) " more"
    return s
}

function node(f) {
    if (!(f in nid)) { nid[f] = ++N; fname[N] = f }
    return nid[f]
}

BEGIN {
    nviol = 0; npend = 0
    # the layers: lname[], lrank[], folder_of[], may[l, m]
    n = split(ENVIRON["HP_NAMES_TABLE"], rows, "\n")
    LN = 0
    for (i = 1; i <= n; i++) {
        if (split(rows[i], w, " ") < 2) continue
        l = w[1]; dir = w[2]; sub(/:$/, "", dir)
        LN++; lname[LN] = l; folder_of[l] = dir
        allowed[l] = substr(rows[i], index(rows[i], ":") + 1)
        k = split(allowed[l], al, " ")
        for (j = 1; j <= k; j++) may[l, al[j]] = 1
        may[l, l] = 1
    }
    # object -> source file
    n = split(ENVIRON["HP_NAMES_MAP"], rows, "\n")
    NOBJ = 0
    for (i = 1; i <= n; i++) if (split(rows[i], w, " ") == 2) { src_of[w[1]] = w[2]; NOBJ++; node(w[2]) }
    n = split(ENVIRON["HP_NAMES_PENDING"], w, /[ \t\n]+/)
    for (i = 1; i <= n; i++) if (w[i] != "") is_pending[w[i]] = 1
}

# nm -P -A: "object: name type [value size]"; undefined U (w, v: weak),
# global definitions in upper case (and i, u: indirect and unique, in GNU nm)
NF >= 3 {
    o = $1; sub(/:$/, "", o)
    if (!(o in src_of)) next
    f = src_of[o]; s = $2; t = $3
    if (s ~ /^(__|_GLOBAL_|DW\.ref\.|\.)/) next
    if (t == "U" || t == "w" || t == "v") { uses[f, s] = 1; next }
    if (t ~ /^[ABCDGIRSTVWiu]$/ && !((f, s) in defines)) {
        defines[f, s] = 1
        definers[s] = definers[s] " " f
    }
}

# The layer of a source path: the layer whose folder holds it.
function layer_of(path,   a, dir) {
    for (a = 1; a <= LN; a++) {
        dir = folder_of[lname[a]]
        if (substr(path, 1, length(dir) + 1) == dir "/") return lname[a]
    }
    return "?"
}

END {
    # uses between files, each pair with its names
    E = 0
    for (k in uses) {
        split(k, p, SUBSEP); f = p[1]; s = p[2]
        if (!(s in definers) || ((f, s) in defines)) continue
        nd = split(definers[s], dl, " ")
        for (j = 1; j <= nd; j++) {
            g = dl[j]
            if (!((f, g) in names)) {
                E++
                a = node(f); b = node(g)
                deg[a]++; adj[a, deg[a]] = b
            }
            names[f, g] = names[f, g] " " s
        }
    }
    # sorted names per edge, for stable output
    for (k in names) {
        nw = split(names[k], w, " ")
        for (i = 2; i <= nw; i++) { x = w[i]; for (j = i - 1; j >= 1 && w[j] > x; j--) w[j + 1] = w[j]; w[j + 1] = x }
        s = ""; for (i = 1; i <= nw; i++) s = s (i > 1 ? " " : "") w[i]
        names[k] = s
    }

    if (mode == "edges") {
        for (k in names) { split(k, p, SUBSEP); print p[1] " -> " p[2] ": " names[k] }
        exit 0
    }

    # (a) arrows up
    for (a = 1; a <= N; a++) for (j = 1; j <= deg[a]; j++) {
        f = fname[a]; g = fname[adj[a, j]]
        lf = layer_of(f); lg = layer_of(g)
        if (lf == "?" || lg == "?" || ((lf, lg) in may)) continue
        nup++
        up[nup] = f SUBSEP g SUBSEP lf SUBSEP lg
    }
    for (i = 1; i <= nup; i++) {
        split(up[i], p, SUBSEP)
        violation(p[1] " " p[2], p[1], "uses " some(names[p[1], p[2]]) " of " p[2] ": " p[3] " may use only" \
                  (allowed[p[3]] == "" ? " itself" : allowed[p[3]] " (and " p[3] ")"))
    }

    # (b) circles of names: two files that use the names of each other, then
    # the circles left when those pairs are taken out (none is hidden: a
    # circle through a pair shows once the pair is undone)
    for (a = 1; a <= N; a++) for (j = 1; j <= deg[a]; j++) edge[a, adj[a, j]] = 1
    for (a = 1; a <= N; a++) for (j = 1; j <= deg[a]; j++) {
        b = adj[a, j]
        if ((b, a) in edge) {
            if (fname[a] < fname[b]) {
                f = fname[a]; g = fname[b]
                violation(f " " g, f " <-> " g, "each uses names of the other: " f " uses " \
                          some(names[f, g]) "; " g " uses " some(names[g, f]))
            }
            continue
        }
        deg1[a]++; adj1[a, deg1[a]] = b
    }
    closure(N, deg1, adj1, reach)
    components(N, reach, comp, csize)
    for (a = 1; a <= N; a++) {
        if (comp[a] != a || csize[a] < 2) continue
        members = ""
        for (b = 1; b <= N; b++) if (comp[b] == a) members = members " " fname[b]
        path = cycle_path(a, deg1, adj1, comp, fname)
        n = split(path, step, " -> ")
        how = ""
        for (k = 1; k < n; k++) how = how (k > 1 ? "; " : "") step[k] " uses " some(names[step[k], step[k + 1]])
        violation(substr(members, 2), fname[a], "circle of names among" members ", e.g. " path " (" how ")")
    }

    for (f in is_pending)
        if (!(f in pending_used)) print "check_names: " f ": on NAMES_PENDING, in no violation now: take it off"

    printf "check_names: %d objects, %d files, %d uses between files, %d violations, %d pending\n", NOBJ, N, E, nviol, npend
    exit (nviol > 0) ? 1 : 0
}
' "$syms"
