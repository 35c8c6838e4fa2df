"""A byte trie over a vocabulary's tokens, stored as flat arrays in preorder.

    tokens: "a"=7 "ab"=3 "b"=9          node  byte  depth  skip  token
                                          0     -     0      4     -1   (root)
          (root)                          1     a     1      3      7
          /    \\                          2     b     2      3      3
        a:7    b:9                        3     b     1      4      9
         |
        ab:3

`skip[i]` is the node after i's subtree, so a walk that finds node i dead jumps over all tokens that start with
its bytes: `i = skip[i]`. Walks keep one automaton state per depth; a node's parent state is at depth-1.
Tokens with no text (control tokens) are left out; several ids with the same bytes share a node (`extra`).
Plain lists of ints: numba or C can walk the same arrays later.
"""

from __future__ import annotations

from collections.abc import Sequence


class TokenTrie:
    def __init__(self, token_bytes: Sequence[bytes | None]) -> None:
        self.n_vocab = len(token_bytes)
        order = sorted((b, i) for i, b in enumerate(token_bytes) if b)
        byte = [0]
        depth = [0]
        token = [-1]
        extra: dict[int, list[int]] = {}
        path = [0]  # path[d] = node at depth d on the current branch
        prev = b""
        for data, tid in order:
            if data == prev:
                node = path[len(data)]
                extra.setdefault(node, [token[node]]).append(tid)
                continue
            common = 0
            limit = min(len(data), len(prev))
            while common < limit and data[common] == prev[common]:
                common += 1
            del path[common + 1 :]
            for d in range(common, len(data)):
                path.append(len(byte))
                byte.append(data[d])
                depth.append(d + 1)
                token.append(-1)
            token[path[len(data)]] = tid
            prev = data
        n = len(byte)
        skip = [n] * n
        open_nodes: list[int] = []
        for i in range(n):
            d = depth[i]
            while open_nodes and depth[open_nodes[-1]] >= d:
                skip[open_nodes.pop()] = i
            open_nodes.append(i)
        for node, ids in extra.items():
            token[node] = -2  # several ids: see extra
            extra[node] = sorted(ids)
        self.byte = byte
        self.depth = depth
        self.skip = skip
        self.token = token
        self.extra = extra
        self.max_depth = max(depth)
        self.n_nodes = n
        # tokens in preorder: those at node i or below are tok_order[first_tok[i] : first_tok[skip[i]]]
        tok_order: list[int] = []
        first_tok = [0] * (n + 1)
        for i in range(n):
            first_tok[i] = len(tok_order)
            t = token[i]
            if t >= 0:
                tok_order.append(t)
            elif t == -2:
                tok_order.extend(extra[i])
        first_tok[n] = len(tok_order)
        self.tok_order = tok_order
        self.first_tok = first_tok
        # below[i]: the set of bytes (a 256-bit int) on the nodes strictly below i
        # height[i]: the most bytes on a path below i (a token's bytes past node i)
        below = [0] * n
        height = [0] * n
        for i in range(n - 1, -1, -1):
            acc, h, j, end = 0, 0, i + 1, skip[i]
            while j < end:
                acc |= (1 << byte[j]) | below[j]
                h = max(h, height[j] + 1)
                j = skip[j]
            below[i] = acc
            height[i] = h
        self.below = below
        self.height = height

    def node_of(self, data: bytes) -> int | None:
        """The node whose path spells `data` (None when no token starts with it)."""
        i = 0
        byte, depth, skip = self.byte, self.depth, self.skip
        for d, b in enumerate(data, 1):
            end = skip[i]
            i += 1
            while i < end and byte[i] != b:
                i = skip[i]
            if i >= end or depth[i] != d:
                return None
        return i

    def tokens_below(self, node: int) -> list[int]:
        """Ids of every token at `node` or in its subtree."""
        out = []
        for i in range(node, self.skip[node]):
            t = self.token[i]
            if t >= 0:
                out.append(t)
            elif t == -2:
                out.extend(self.extra[i])
        return out
