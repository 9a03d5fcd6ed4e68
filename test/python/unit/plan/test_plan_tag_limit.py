"""plan.tag_limit: the user tags raidsnap copies onto a snapshot or a volume never take it past
EC2's 50 tags per resource, and raidsnap's own tags always stay."""

from __future__ import annotations

from raidsnap.plan import tag_limit

OWN = {f"raidsnap:k{i}": "v" for i in range(17)} | {"Name": "raidsnap s1"}


def user_tags(count: int) -> dict[str, str]:
    return {f"team-{i:02d}": "x" for i in range(count)}


def test_copied_tags_that_fit_are_all_kept() -> None:
    fitted = tag_limit.fit(OWN, user_tags(10))
    assert fitted.kept == user_tags(10)
    assert fitted.dropped == ()


def test_copied_tags_stop_at_fifty_with_every_own_tag_kept() -> None:
    # GIVEN 18 tags of raidsnap's own and 45 user tags to copy
    fitted = tag_limit.fit(OWN, user_tags(45))

    # THEN own + kept is exactly EC2's 50, and the rest are named as dropped
    assert len(set(OWN) | set(fitted.kept)) == tag_limit.MAX_TAGS == 50
    assert len(fitted.kept) == 32
    assert len(fitted.dropped) == 13
    assert set(fitted.kept) | set(fitted.dropped) == set(user_tags(45))
    # AND which ones go does not depend on the order EC2 listed them in (a retried step
    # copies the same tags)
    reordered = dict(reversed(list(user_tags(45).items())))
    assert tag_limit.fit(OWN, reordered) == fitted


def test_a_copied_key_raidsnap_also_writes_costs_no_room() -> None:
    fitted = tag_limit.fit(OWN, {"Name": "billing-db"} | user_tags(32))
    assert "Name" in fitted.kept
    assert len(fitted.kept) == 33
    assert fitted.dropped == ()


def test_room_is_kept_for_the_tags_raidsnap_adds_later() -> None:
    # A restored volume gets raidsnap:replaced-by when a later replace retires it.
    fitted = tag_limit.fit(OWN, user_tags(32), later=["raidsnap:replaced-by", "raidsnap:k0"])
    assert len(fitted.kept) == 31
    assert fitted.dropped == ("team-31",)


def test_aws_tags_are_never_copied_and_do_not_count() -> None:
    # aws: keys are AWS's: nobody can write them, and they do not count toward the 50.
    fitted = tag_limit.fit(OWN, {"aws:backup:source-resource": "x"} | user_tags(2))
    assert fitted.kept == user_tags(2)
    assert fitted.dropped == ()


def test_the_note_names_the_dropped_tags_and_where_they_were_not_copied() -> None:
    note = tag_limit.note(
        {"vol-1": ("a", "b"), "vol-2": ("a", "b"), "vol-3": ()}, onto="their snapshots"
    )
    assert note == (
        "tags a, b of vol-1, vol-2 were not copied onto their snapshots: EC2 allows 50 tags "
        "per resource and raidsnap's own come first"
    )
    assert tag_limit.note({"vol-1": ()}, onto="x") == ""


def test_a_long_list_of_dropped_tags_is_shortened() -> None:
    dropped = tuple(f"t{i:02d}" for i in range(25))
    note = tag_limit.note({"snap-1": dropped}, onto="the restored volume")
    assert "t00, t01" in note
    assert "t09 and 15 more" in note
    assert "t10" not in note
