"""Fair shares of a server-wide budget (buffered chunk bytes, open chunk groups, body bytes
in flight): one account at its caps never blocks another.

A budget is used freely while it has room. When an account asks for more than is left,
its fair share is the budget divided by the accounts holding some of it (the asker
included): an asker within its share gets room reclaimed from the accounts over theirs
(their least recently active holdings go first, and are told so), an asker over its share
is refused at once. Work-conserving: a lone account may use the whole budget, and only
gives some back when another account asks. Pure arithmetic; the registries do the freeing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: What a request for room gets: it fits, it fits once ``reclaim`` is freed from accounts
#: over their share, or the asker is over its own share and is refused.
FITS, RECLAIM, OVER_SHARE = "fits", "reclaim", "over-share"


@dataclass(frozen=True)
class Verdict:
    outcome: str
    #: The asker's fair share while the budget is contended.
    share: int = 0
    #: How much must be freed from other accounts for the request to fit.
    reclaim: int = 0


def holders(held: Mapping[str, int], asker: str) -> int:
    """Accounts that hold some of the budget, the asker counted in."""
    return len({account for account, amount in held.items() if amount > 0} | {asker})


def fair_share(cap: int, held: Mapping[str, int], asker: str) -> int:
    """The asker's share of ``cap`` while others hold some of it too."""
    return cap // holders(held, asker)


def judge(held: Mapping[str, int], asker: str, asked: int, cap: int) -> Verdict:
    """Whether ``asker`` may take ``asked`` more of a budget of ``cap`` (``held``: what each
    account holds now)."""
    total = sum(held.values())
    if total + asked <= cap:
        return Verdict(FITS)
    share = fair_share(cap, held, asker)
    if held.get(asker, 0) + asked > share:
        return Verdict(OVER_SHARE, share)
    return Verdict(RECLAIM, share, total + asked - cap)


def over_share(held: Mapping[str, int], asker: str, cap: int) -> list[str]:
    """Accounts other than the asker holding more than their share, most over first: where
    reclaimed room comes from."""
    share = fair_share(cap, held, asker)
    over = [(amount - share, account) for account, amount in held.items()
            if account != asker and amount > share]
    return [account for _, account in sorted(over, reverse=True)]
