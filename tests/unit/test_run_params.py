"""Run parameters and body templates, the pure parts: what a trigger may pass, how it
is checked, and how a template becomes a run's body (a parameter never leaves the
JSON string it was put in)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tickwork.core.errors import InvalidParamsError
from tickwork.core.params import (
    MAX_PARAMS,
    PARAMS_TEXT_LIMIT,
    check_params,
    encode_params,
    env_name,
    parse_assignment,
    parse_params,
)
from tickwork.core.templates import (
    MAX_PLACEHOLDERS,
    RunValues,
    TemplateError,
    check_template,
    render_template,
)
from tickwork.queue.messages import RunMessage

pytestmark = pytest.mark.unit

VALUES = RunValues(
    run_id="u.manual.t1",
    scheduled_time="2026-12-01T09:00:00Z",
    attempt=2,
    job="report",
    namespace="team-a",
    params={"region": "eu"},
)


# -- parameters ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"region": "eu", "dryRun": "true", "batch_2": "x"}, None),
        ({"": "x"}, "parameter name '' must be a letter followed by"),
        ({"1st": "x"}, "parameter name '1st' must be a letter"),
        ({"re-gion": "x"}, "parameter name 're-gion'"),
        ({"a" * 33: "x"}, "must be a letter followed by up to 31"),
        ({"region": "eu\nus"}, "'region' must be one line of text without control characters"),
        ({"region": "eu\x00"}, "without control characters"),
        ({"region": 3}, "parameter 'region' must be a string, not 3"),
        (
            {"Region": "a", "REGION": "b"},
            "'Region' and 'REGION' differ only in case; both would be TICKWORK_PARAM_REGION",
        ),
        ({f"p{i}": "x" for i in range(MAX_PARAMS + 1)}, f"at most {MAX_PARAMS} parameters"),
        ({"note": "x" * (PARAMS_TEXT_LIMIT - 4)}, None),  # exactly at the limit
        (
            {"note": "x" * (PARAMS_TEXT_LIMIT - 3)},
            f"at most {PARAMS_TEXT_LIMIT} characters in all, not {PARAMS_TEXT_LIMIT + 1}",
        ),
        ({"city": "Zürich ✓"}, None),  # any printable text
    ],
)
def test_parameters_are_checked_with_a_message_that_says_what_to_fix(
    params: dict[str, Any], problem: str | None
) -> None:
    if problem is None:
        assert check_params(params) == params
    else:
        with pytest.raises(InvalidParamsError, match=problem.replace("(", r"\(")):
            check_params(params)


@pytest.mark.parametrize(
    ("annotation", "params"),
    [(None, {}), ("", {}), ("  ", {}), ('{"region":"eu"}', {"region": "eu"}), ("{}", {})],
)
def test_the_annotation_holds_a_json_object_of_strings(
    annotation: str | None, params: dict[str, str]
) -> None:
    assert parse_params(annotation) == params


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        ("region=eu", "tickwork.dev/run-params must be a JSON object of strings"),
        ('["eu"]', "tickwork.dev/run-params must be a JSON object of strings"),
        ("{", "tickwork.dev/run-params must be a JSON object of strings"),
        ('{"region": 1}', "parameter 'region' must be a string, not 1"),
        ('{"a": "' + "x" * 5000 + '"}', "run-params holds 5009 characters; parameters take"),
    ],
)
def test_anything_else_in_the_annotation_is_refused(annotation: str, problem: str) -> None:
    with pytest.raises(InvalidParamsError) as excinfo:
        parse_params(annotation)
    assert problem in str(excinfo.value)


def test_the_encoded_form_is_compact_ascii_json_that_reads_back() -> None:
    params = {"city": "Zürich", "b": '"quoted"'}
    text = encode_params(params)
    assert text.isascii()
    assert " " not in text
    assert parse_params(text) == params


def test_names_become_environment_variables_and_assignments_split_at_the_first_equals() -> None:
    assert env_name("dryRun") == "TICKWORK_PARAM_DRYRUN"
    assert parse_assignment("query=a=b") == ("query", "a=b")
    assert parse_assignment("empty=") == ("empty", "")
    with pytest.raises(InvalidParamsError, match="must be NAME=VALUE"):
        parse_assignment("region")


def test_messages_of_older_versions_still_decode_and_new_ones_carry_the_parameters() -> None:
    old = RunMessage.from_json(
        '{"run_id":"u.manual.t","namespace":"n","name":"j","uid":"u","attempt":2,"redeliveries":0}'
    )
    assert (old.params, old.triggered_at, old.attempt) == (None, None, 2)
    new = RunMessage(
        run_id="u.manual.t",
        namespace="n",
        name="j",
        uid="u",
        triggered_at="2026-12-01T09:00:00+00:00",
        params={"region": "eu"},
    )
    assert RunMessage.from_json(new.to_json()) == new
    assert '"params"' not in RunMessage(run_id="r", namespace="n", name="j", uid="u").to_json()
    # As Redis' Lua (cjson) re-encodes a message on a retry: escaped slashes, any order.
    relayed = '{"uid":"u","params":{"path":"a\\/b"},"name":"j","namespace":"n","run_id":"r"}'
    assert RunMessage.from_json(relayed).params == {"path": "a/b"}


# -- templates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "body"),
    [
        ('{"region": "{{params.region}}"}', {"region": "eu"}),
        (
            '{"r": "{{ params.region }}", "when": "{{scheduledTime}}"}',
            {"r": "eu", "when": "2026-12-01T09:00:00Z"},
        ),
        ('{"try": "{{attempt}}", "text": "try {{attempt}}"}', {"try": 2, "text": "try 2"}),
        (
            '{"all": "{{params}}", "as text": "params {{params}}"}',
            {"all": {"region": "eu"}, "as text": 'params {"region":"eu"}'},
        ),
        (
            '{"missing": "{{params.other}}", "in text": "[{{params.other}}]"}',
            {"missing": None, "in text": "[]"},
        ),
        (
            '{"{{job}}": "{{namespace}}/{{job}}", "{{attempt}}": 1}',
            {"report": "team-a/report", "2": 1},  # a key stays a string
        ),
        (
            '["{{runId}}", 1.50, true, null, "{x}", "{{{runId}}}"]',
            ["u.manual.t1", 1.5, True, None, "{x}", "{u.manual.t1}"],
        ),
        ('"{{runId}}"', "u.manual.t1"),
        (
            '{"plain": "no placeholders, \\"quotes\\" and \\\\ slashes"}',
            {"plain": 'no placeholders, "quotes" and \\ slashes'},
        ),
    ],
)
def test_a_template_becomes_the_runs_body(template: str, body: Any) -> None:
    check_template(template)
    assert json.loads(render_template(template, VALUES)) == body


def test_numbers_and_layout_of_the_template_are_kept_as_written() -> None:
    template = '{\n  "big": 12345678901234567890.000,\n  "id": "{{runId}}"\n}'
    assert render_template(template, VALUES) == (
        '{\n  "big": 12345678901234567890.000,\n  "id": "u.manual.t1"\n}'
    )


@pytest.mark.parametrize(
    "value",
    [
        'eu", "admin": true, "x": "',
        "eu\\",
        '"}{"',
        "\u2028</script>",
        "{{runId}}",  # a value is not a template itself
    ],
)
def test_a_parameter_cannot_break_out_of_its_string(value: str) -> None:
    values = RunValues(
        run_id="r", scheduled_time="t", attempt=1, job="j", namespace="n", params={"region": value}
    )
    template = '{"region": "{{params.region}}", "sentence": "in {{params.region}} now"}'
    assert json.loads(render_template(template, values)) == {
        "region": value,
        "sentence": f"in {value} now",
    }


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ('{"try": {{attempt}}}', "bodyTemplate must be JSON, with each placeholder inside a"),
        ("region={{params.region}}", "bodyTemplate must be JSON"),
        ('{"a": "{{runID}}"}', "bodyTemplate placeholders are {{runId}}"),
        ('{"a": "{{params.re-gion}}"}', "not {{params.re-gion}}"),
        ('{"a": "{{ secret }}"}', "not {{ secret }}"),
        ('{"a": "{{}}"}', "not {{}}"),
        (
            "[" + ",".join(['"{{runId}}"'] * (MAX_PLACEHOLDERS + 1)) + "]",
            f"bodyTemplate may hold at most {MAX_PLACEHOLDERS} placeholders",
        ),
    ],
)
def test_a_template_that_cannot_work_is_refused_saying_why(template: str, problem: str) -> None:
    with pytest.raises(TemplateError) as excinfo:
        check_template(template)
    assert problem in str(excinfo.value)


def test_at_most_the_placeholder_limit_is_fine() -> None:
    check_template("[" + ",".join(['"{{runId}}"'] * MAX_PLACEHOLDERS) + "]")
