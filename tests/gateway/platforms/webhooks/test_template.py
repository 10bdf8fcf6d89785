"""The payload-to-prompt template: substitutions only, defaults, missing fields, parse errors."""

from __future__ import annotations

import pytest

from gateway.platforms.webhooks.template import MAX_VALUE_CHARS, TemplateError, parse_template

ISSUE = {
    "action": "opened",
    "issue": {"title": "Crash on start", "number": 7, "labels": [{"name": "bug"}, {"name": "p1"}]},
    "draft": False,
    "closed_at": None,
}


def render(text: str, payload: object = ISSUE, **specials: str) -> str:
    return parse_template(text).render(payload, specials)


def test_a_dotted_path_prints_the_field() -> None:
    assert render("#{{ issue.number }} {{ issue.title }}") == "#7 Crash on start"


def test_list_indexes_work_with_dots_and_brackets() -> None:
    assert render("{{ issue.labels.0.name }}/{{ issue.labels[1].name }}") == "bug/p1"


def test_a_missing_field_prints_a_visible_marker() -> None:
    assert render("by {{ sender.login }}") == "by <missing sender.login>"


def test_an_index_past_the_end_is_missing() -> None:
    assert render("{{ issue.labels.5.name }}") == "<missing issue.labels.5.name>"


def test_default_replaces_a_missing_field() -> None:
    assert render('by {{ sender.login | default("someone") }}') == "by someone"


def test_default_replaces_null_and_null_without_default_prints_null() -> None:
    assert render('{{ closed_at | default("open") }} {{ closed_at }}') == "open null"


def test_default_keeps_a_present_field() -> None:
    assert render('{{ action | default("x") }}') == "opened"


def test_booleans_and_objects_print_as_json() -> None:
    assert render("{{ draft }} {{ issue.labels.0 }}") == 'false {"name":"bug"}'


def test_a_huge_object_is_cut() -> None:
    text = render("{{ blob }}", {"blob": ["x" * 100] * 100})
    assert len(text) == MAX_VALUE_CHARS + 1 and text.endswith("…")


def test_specials_name_the_event_and_route() -> None:
    assert render("{{ $event }} on {{ $route }}", event="issues", route="gh") == "issues on gh"


def test_a_value_that_looks_like_a_template_is_printed_not_expanded() -> None:
    assert render("{{ issue.title }}", {"issue": {"title": "{{ secret }}"}}) == "{{ secret }}"


@pytest.mark.parametrize(
    "text",
    [
        "{{ ''.__class__ }}",
        "{{ __import__('os').system('id') }}",
        "{{ a + b }}",
        "{{ issue.title | upper }}",
        "{{ issue.title | default(x) }}",
        "hello {{ issue.title",
        "{{ }}",
    ],
)
def test_anything_but_a_path_and_default_is_a_parse_error(text: str) -> None:
    with pytest.raises(TemplateError):
        parse_template(text)


def test_plain_text_renders_as_is() -> None:
    assert render("no holes } here {") == "no holes } here {"
