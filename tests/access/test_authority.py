"""berth.access: the cached answers of TokenReview and SubjectAccessReview,
the API server's Forbidden message, and a caller's namespace scope."""

from __future__ import annotations

import asyncio

import pytest

from berth import access, errors
from tests.access.fakes import TableReviewer

pytestmark = pytest.mark.asyncio

ALICE = access.Caller("alice", ("system:authenticated",))


def _authority(reviewer: TableReviewer) -> tuple[access.Authority, list[float]]:
    now = [0.0]
    return access.Authority(reviewer, clock=lambda: now[0]), now


@pytest.mark.parametrize(
    ("attrs", "reason", "message"),
    [
        (
            access.Attributes("list", "pods", namespace="team-a"),
            "",
            'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team-a"',
        ),
        (
            access.Attributes("list", "nodes"),
            "",
            'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope',
        ),
        (
            access.Attributes("get", "pods", namespace="b", name="web"),
            "",
            'pods "web" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "b"',
        ),
        (
            access.Attributes("create", "pods", namespace="b", name="web", subresource="binding"),
            "no RBAC policy matched",
            'pods "web" is forbidden: User "alice" cannot create resource "pods/binding" in API group "" '
            'in the namespace "b": no RBAC policy matched',
        ),
        (
            access.Attributes("get", "queues", "berth.dev", name="gpu"),
            "",
            'queues.berth.dev "gpu" is forbidden: User "alice" cannot get resource "queues" '
            'in API group "berth.dev" at the cluster scope',
        ),
    ],
)
async def test_forbidden_reads_like_the_api_server(attrs: access.Attributes, reason: str, message: str) -> None:
    # k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go forbiddenMessage (v0.37.2)
    err = access.forbidden(ALICE, attrs, reason)
    assert isinstance(err, errors.PermissionDenied)
    assert str(err) == message


async def test_a_token_is_reviewed_once_per_ttl() -> None:
    reviewer = TableReviewer({"t": "alice"})
    authority, now = _authority(reviewer)
    assert (await authority.authenticate("t")).user == "alice"
    assert (await authority.authenticate("t")).token == "t"
    assert reviewer.token_reviews == 1
    now[0] = access.TOKEN_TTL_SECONDS + 0.1
    await authority.authenticate("t")
    assert reviewer.token_reviews == 2


async def test_a_bad_token_is_unauthenticated_with_the_reviewers_reason() -> None:
    authority, _ = _authority(TableReviewer({}))
    with pytest.raises(errors.Unauthenticated, match="TokenReview"):
        await authority.authenticate("nope")


async def test_concurrent_askers_share_one_review() -> None:
    reviewer = TableReviewer({"t": "alice"}, [("alice", "list", "pods", "", "a")], delay=0.01)
    authority, _ = _authority(reviewer)
    callers = await asyncio.gather(*(authority.authenticate("t") for _ in range(20)))
    assert {c.user for c in callers} == {"alice"} and reviewer.token_reviews == 1
    attrs = access.Attributes("list", "pods", namespace="a")
    answers = await asyncio.gather(*(authority.allowed(callers[0], attrs) for _ in range(20)))
    assert all(ok for ok, _ in answers) and len(reviewer.access_reviews) == 1


async def test_an_asker_that_goes_away_does_not_cancel_the_others_answer() -> None:
    reviewer = TableReviewer({"t": "alice"}, delay=0.05)
    authority, _ = _authority(reviewer)
    first = asyncio.ensure_future(authority.authenticate("t"))
    second = asyncio.ensure_future(authority.authenticate("t"))
    await asyncio.sleep(0.01)
    first.cancel()
    assert (await second).user == "alice"
    with pytest.raises(asyncio.CancelledError):
        await first


@pytest.mark.parametrize("allowed", [True, False])
async def test_allowed_and_denied_answers_expire(allowed: bool) -> None:
    grants = [("alice", "list", "pods", "", "a")] if allowed else []
    reviewer = TableReviewer({}, grants)
    authority, now = _authority(reviewer)
    attrs = access.Attributes("list", "pods", namespace="a")
    assert (await authority.allowed(ALICE, attrs))[0] is allowed
    assert (await authority.allowed(ALICE, attrs))[0] is allowed
    assert len(reviewer.access_reviews) == 1
    now[0] = (access.ALLOW_TTL_SECONDS if allowed else access.DENY_TTL_SECONDS) + 0.1
    await authority.allowed(ALICE, attrs)
    assert len(reviewer.access_reviews) == 2


async def test_an_unrestricted_caller_is_never_reviewed() -> None:
    reviewer = TableReviewer({})
    authority, _ = _authority(reviewer)
    assert (await authority.allowed(access.ANYONE, access.Attributes("delete", "nodes")))[0]
    assert reviewer.access_reviews == []


async def test_require_raises_the_forbidden_message() -> None:
    authority, _ = _authority(TableReviewer({}))
    with pytest.raises(errors.PermissionDenied, match='cannot get resource "pods"'):
        await authority.require(ALICE, access.Attributes("get", "pods", namespace="x", name="p"))


@pytest.mark.parametrize(
    ("grants", "visible", "reviews"),
    [
        # A cluster-wide grant: one review, everything visible.
        ([("alice", "list", "pods", "", "")], ["a", "b", "c", "a"], 1),
        # Per namespace: the cluster-wide question, then each namespace once.
        ([("alice", "list", "pods", "", "a"), ("alice", "list", "pods", "", "c")], ["a", "c", "a"], 4),
        ([], [], 4),
    ],
)
async def test_a_scope_filters_by_namespace_asking_each_once(
    grants: list[tuple[str, str, str, str, str]], visible: list[str], reviews: int
) -> None:
    reviewer = TableReviewer({}, grants)
    authority, _ = _authority(reviewer)
    scope = authority.scope(ALICE, "list", "pods")
    items = ["a", "b", "c", "a"]
    assert await scope.filter(items, lambda ns: ns) == visible
    assert await scope.filter(items, lambda ns: ns) == visible
    assert len(reviewer.access_reviews) == reviews


async def test_a_scope_without_an_authority_sees_everything() -> None:
    scope = access.Scope(None, ALICE, "list", "pods")
    assert await scope.filter(["x", "y"], lambda ns: ns) == ["x", "y"]


async def test_the_cache_is_bounded() -> None:
    reviewer = TableReviewer({f"t{i}": f"u{i}" for i in range(access.MAX_CACHED + 10)})
    authority, _ = _authority(reviewer)
    for i in range(access.MAX_CACHED + 10):
        await authority.authenticate(f"t{i}")
    await authority.authenticate("t0")  # evicted: reviewed again
    assert reviewer.token_reviews == access.MAX_CACHED + 11


async def test_a_client_past_its_failed_authentications_is_refused_without_a_review() -> None:
    reviewer = TableReviewer({"good": "alice"})
    authority, now = _authority(reviewer)
    for i in range(access.FAILURES_PER_WINDOW):
        with pytest.raises(errors.Unauthenticated):
            await authority.authenticate(f"bad-{i}", client="10.0.0.9")
    assert reviewer.token_reviews == access.FAILURES_PER_WINDOW
    with pytest.raises(errors.ResourceExhausted, match=r"too many failed authentications from 10\.0\.0\.9"):
        await authority.authenticate("bad-x", client="10.0.0.9")
    with pytest.raises(errors.ResourceExhausted):
        await authority.authenticate("good", client="10.0.0.9")  # even a good token waits out the window
    assert reviewer.token_reviews == access.FAILURES_PER_WINDOW  # none was sent
    assert (await authority.authenticate("good", client="10.0.0.10")).user == "alice"  # others are not held
    now[0] = access.FAILURE_WINDOW_SECONDS + 1
    assert (await authority.authenticate("good", client="10.0.0.9")).user == "alice"  # a new window


async def test_successes_do_not_count_against_a_client() -> None:
    authority, _ = _authority(TableReviewer({"good": "alice"}))
    for _ in range(access.FAILURES_PER_WINDOW * 2):
        await authority.authenticate("good", client="10.0.0.9")
