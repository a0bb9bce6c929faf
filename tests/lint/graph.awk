# tests/lint/graph.awk: the graph functions the layering checks share
# (check_layers.sh, check_names.sh): reachability, strongly connected
# components, one shortest circle.  POSIX awk; a script puts this text in
# front of its own program.

# reach[u SUBSEP v] = 1 when v is reachable from u in one step or more,
# over the graph of n nodes in deg[]/adj[u SUBSEP k].
function closure(n, deg, adj, reach,   u, v, x, k, qh, qt) {
    for (u = 1; u <= n; u++) {
        qh = 1; qt = 0
        for (k = 1; k <= deg[u]; k++) {
            v = adj[u, k]
            if (!((u, v) in reach)) { reach[u, v] = 1; Q[++qt] = v }
        }
        while (qh <= qt) {
            x = Q[qh++]
            for (k = 1; k <= deg[x]; k++) {
                v = adj[x, k]
                if (!((u, v) in reach)) { reach[u, v] = 1; Q[++qt] = v }
            }
        }
    }
}

# comp[u]: the smallest node of the strongly connected component of u;
# csize[c]: its size.  A node with an edge to itself is a component of
# size 1 that is still a cycle (reach[u, u]).
function components(n, reach, comp, csize,   u, v) {
    for (u = 1; u <= n; u++) {
        comp[u] = u
        for (v = 1; v < u; v++)
            if (((u, v) in reach) && ((v, u) in reach)) { comp[u] = comp[v]; break }
        csize[comp[u]]++
    }
}

# One shortest cycle through u inside its component, as labels joined by
# " -> ", starting and ending at u.
function cycle_path(u, deg, adj, comp, label,   x, v, k, qh, qt, last, s) {
    split("", PAR)
    qh = 1; qt = 1; Q[1] = u; PAR[u] = 0; last = 0
    while (qh <= qt && !last) {
        x = Q[qh++]
        for (k = 1; k <= deg[x]; k++) {
            v = adj[x, k]
            if (v == u) { last = x; break }
            if (comp[v] == comp[u] && !(v in PAR)) { PAR[v] = x; Q[++qt] = v }
        }
    }
    s = label[u]
    for (x = last; x != u && x != 0; x = PAR[x]) s = label[x] " -> " s
    return label[u] " -> " s
}
