"""A :class:`berth.access.Reviewer` with a table of who is who and who may
what, counting the reviews it answers (what the API server would do with
TokenReview and SubjectAccessReview, for tests without one)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from berth import access, errors


class TableReviewer:
    def __init__(
        self,
        tokens: Mapping[str, str],
        grants: Iterable[tuple[str, str, str, str, str]] = (),
        *,
        delay: float = 0.0,
    ) -> None:
        """``tokens``: token -> user; ``grants``: (user, verb, resource,
        group, namespace) with namespace "" for a cluster-wide grant."""
        self.tokens = dict(tokens)
        self.grants = set(grants)
        self.delay = delay
        self.token_reviews = 0
        self.access_reviews: list[tuple[str, access.Attributes]] = []

    async def review_token(self, token: str) -> access.Caller:
        self.token_reviews += 1
        await asyncio.sleep(self.delay)
        user = self.tokens.get(token)
        if user is None:
            raise errors.Unauthenticated("the API server did not accept the bearer token (TokenReview): invalid")
        return access.Caller(user, ("system:authenticated",), token=token)

    async def review_access(self, caller: access.Caller, attrs: access.Attributes) -> tuple[bool, str]:
        self.access_reviews.append((caller.user, attrs))
        await asyncio.sleep(self.delay)
        for ns in ("", attrs.namespace):
            if (caller.user, attrs.verb, attrs.resource, attrs.group, ns) in self.grants:
                return True, "granted"
        return False, ""
