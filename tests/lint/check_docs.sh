#!/bin/sh
# Documentation checks, run by `make check` (tests/lint/docs.mk) with HP_BUILDDIR
# and HP_SRCDIR in the environment:
#  1. doc/settings.md is what scripts/gen_settings_doc.sh makes from the
#     built hipress_info (rerun the script after changing the settings table);
#  2. every compressor that `hipress_info --compressors` lists is documented
#     in doc/compressors.md, as `name` in code style, in a heading or in a
#     table cell (the file must exist);
#  3. every HIPRESS_* variable named in README.md, doc/*.md (the users'
#     pages) and doc/dev/*.md (the contributors') is a setting (a name
#     ending in * must be the prefix of one); the logs of doc/measured/
#     keep the names their runs had;
#  4. every relative link in README.md and in every page under doc/
#     (doc/dev/ and doc/measured/ included) points to a file that exists;
#  5. a file of the sources, tests, build or docs that cites a contract
#     ("contract 1") points to their definition, doc/dev/contracts.md;
#  6. no page under doc/ is over 400 lines (a longer one is two pages).
set -u

src=${HP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${HP_BUILDDIR:-$src/_build}
info=$build/hipress_info
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $*"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $*"; }

if [ ! -x "$info" ]; then
    echo "check_docs: $info not found (set HP_BUILDDIR)" >&2
    exit 1
fi

# 1. generated settings page
if "$src/scripts/gen_settings_doc.sh" --check "$build"; then
    ok "doc/settings.md matches hipress_info --settings"
else
    not_ok "doc/settings.md is out of date: run scripts/gen_settings_doc.sh $build and commit doc/settings.md"
fi

# 2. compressors documented
comps=$(env -u HIPRESS_PLUGIN "$info" --compressors)
if [ -z "$comps" ]; then
    not_ok "hipress_info --compressors listed nothing"
elif [ ! -f "$src/doc/compressors.md" ]; then
    not_ok "doc/compressors.md does not exist (it must document: $(echo $comps))"
else
    for c in $comps; do
        if grep -Eq "\`$c\`|^#+ .*\\b$c\\b|\\|[[:space:]]*$c[[:space:]]*\\|" "$src/doc/compressors.md"; then
            ok "compressor $c is documented in doc/compressors.md"
        else
            not_ok "compressor $c is not documented in doc/compressors.md (write it as \`$c\`)"
        fi
    done
fi

# the pages users and contributors read; every page (the logs' too)
docs="$src/README.md"
for f in "$src"/doc/*.md "$src"/doc/dev/*.md; do
    [ -f "$f" ] && docs="$docs $f"
done
pages="$src/README.md $(find "$src/doc" -name '*.md' | LC_ALL=C sort | tr '\n' ' ')"
MAX_PAGE_LINES=400

# 3. HIPRESS_* names in the docs are real settings
known=$(env -u HIPRESS_PLUGIN "$info" --settings | grep -E '^HIPRESS_' | sed 's/=.*//')
for f in $docs; do
    rel=${f#"$src"/}
    bad=
    # HIPRESS_NET_* stands for the settings starting with HIPRESS_NET_
    # (set -f: such a word must not be expanded as a file pattern)
    set -f
    for v in $(grep -oE 'HIPRESS_[A-Z0-9_]*[A-Z0-9](_?\*)?' "$f" | sort -u); do
        case "$v" in
        # C identifiers of the public headers, not environment settings
        HIPRESS_COMP_*|HIPRESS_COMPRESSOR_ABI_VERSION|HIPRESS_OK|HIPRESS_ERR_*|HIPRESS_VERSION_*|HIPRESS_H|HIPRESS_NO_MPI) ;;
        *\*) printf '%s\n' "$known" | grep -q "^${v%\*}" || bad="$bad $v" ;;
        *) printf '%s\n' "$known" | grep -qx "$v" || bad="$bad $v" ;;
        esac
    done
    set +f
    if [ -z "$bad" ]; then
        ok "$rel names only existing settings"
    else
        not_ok "$rel names settings that do not exist:$bad"
    fi
done

# 4. relative links resolve (anchors and external links are not checked)
for f in $pages; do
    rel=${f#"$src"/}
    dir=$(dirname "$f")
    bad=
    for target in $(grep -oE '\]\([^)#[:space:]]+' "$f" | sed 's/^](//' | grep -vE '^[a-z]+:' | sort -u); do
        [ -e "$dir/$target" ] || bad="$bad $target"
    done
    if [ -z "$bad" ]; then
        ok "$rel links resolve"
    else
        not_ok "$rel links to missing files:$bad"
    fi
done

# 5. contracts cited where they are defined
bad=
for f in $(cd "$src" && grep -rlE '[Cc]ontracts? [1-5]\b' README.md doc src cuda include mpi_wrappers tests \
               Makefile.am configure.ac 2>/dev/null); do
    case "$f" in doc/dev/contracts.md) continue ;; esac
    grep -q 'contracts\.md' "$src/$f" || bad="$bad $f"
done
if [ -z "$bad" ]; then
    ok "every citation of a contract points to doc/dev/contracts.md"
else
    not_ok "these files cite a contract without pointing to doc/dev/contracts.md:$bad"
fi

# 6. the length of every page
bad=
for f in $pages; do
    n=$(wc -l <"$f")
    [ "$n" -le $MAX_PAGE_LINES ] || bad="$bad ${f#"$src"/} ($n lines)"
done
if [ -z "$bad" ]; then
    ok "no page under doc/ is over $MAX_PAGE_LINES lines"
else
    not_ok "pages over $MAX_PAGE_LINES lines (split each along its sections):$bad"
fi

echo "check_docs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
