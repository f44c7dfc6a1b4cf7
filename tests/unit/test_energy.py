"""Host-hours and energy not spent, per UTC day, from the gear history (module_utils/fleetnap/energy.py)."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils.fleetnap.energy import EnergyError, check_figures, daily, parse_time, read_history

W = {"a": {"on": 200, "asleep": 10, "off": 5}, "b": {"on": 100, "asleep": 4, "off": 2}}


def line(t, power, **kw):
    return json.dumps(dict({"finished": t, "gear": 1, "power": power}, **kw))


def test_parse_time_takes_what_gear_record_writes():
    assert parse_time("2026-11-25T00:00:00+00:00", "x") == 1795564800
    assert parse_time("2026-11-25T00:00:00.250000+00:00", "x") == 1795564800.25
    assert parse_time("2026-11-25T00:00:00Z", "x") == 1795564800
    assert parse_time("2026-11-25T00:00:00.5", "x") == 1795564800.5      # now(utc=true).isoformat()
    for bad in ("2026-11-25T00:00:00+01:00", "2026-11-25T00:00:00-05:00", "2026-11-25T00:00:00.5+02:00", "yesterday", "2026-11-25T00:00:00.x+00:00", 5):
        with pytest.raises(EnergyError, match="^x: "):
            parse_time(bad, "x")


def test_a_night_parked_across_midnight_is_split_by_day_and_priced_per_host():
    hist = read_history([line("2026-11-24T22:00:00+00:00", {"a": "asleep", "b": "off"}),
                         line("2026-11-25T06:00:00+00:00", {"a": "on", "b": "on"})])
    out = daily(hist, check_figures(W), until=parse_time("2026-11-25T08:00:00Z", "u"))
    d1, d2 = out["days"]
    assert d1["day"] == "2026-11-24" and d1["host_hours"] == {"on": 0.0, "asleep": 2.0, "off": 2.0, "unknown": 0.0}
    assert d1["parked_host_hours"] == 4.0
    # a: 2 h x 190 W, b: 2 h x 98 W
    assert d1["kwh_not_spent"] == pytest.approx((2 * 190 + 2 * 98) / 1000.0)
    assert d2["host_hours"] == {"on": 4.0, "asleep": 6.0, "off": 6.0, "unknown": 0.0}
    assert d2["kwh_not_spent"] == pytest.approx((6 * 190 + 6 * 98) / 1000.0)
    assert d2["kwh_if_on"] == pytest.approx(8 * 300 / 1000.0)
    assert d2["kwh_used"] == pytest.approx(d2["kwh_if_on"] - d2["kwh_not_spent"])
    assert out["total"]["parked_host_hours"] == 16.0 and out["hosts_without_figures"] == []


def test_unknown_saves_nothing_and_hosts_without_figures_count_in_hours_only():
    hist = read_history([line("2026-11-25T00:00:00Z", {"a": "unknown", "c": "asleep"})])
    out = daily(hist, check_figures(W), until=parse_time("2026-11-25T01:00:00Z", "u"))
    d = out["days"][0]
    assert d["host_hours"]["unknown"] == 1.0 and d["parked_host_hours"] == 1.0
    assert d["kwh_not_spent"] == 0.0 and out["hosts_without_figures"] == ["c"]


def test_lines_out_of_order_and_blank_lines():
    hist = read_history(["", line("2026-11-25T02:00:00Z", {"a": "on"}), line("2026-11-25T01:00:00Z", {"a": "off"})])
    assert [p for _t, p in hist] == [{"a": "off"}, {"a": "on"}]
    out = daily(hist, check_figures(W), until=parse_time("2026-11-25T02:00:00Z", "u"))
    assert out["total"]["parked_host_hours"] == 1.0


@pytest.mark.parametrize("figures, words", [
    ({"a": {"on": 100, "asleep": 5}}, "a.off: must be watts"),
    ({"a": {"on": float("nan"), "asleep": 5, "off": 1}}, "a.on: must be watts"),
    ({"a": {"on": 1e9, "asleep": 5, "off": 1}}, "a.on: must be watts, a number from 0 to 100000"),
    ({"a": {"on": 100, "asleep": -1, "off": 1}}, "a.asleep: must be watts"),
    ({"a": {"on": 100, "asleep": True, "off": 1}}, "a.asleep: must be watts"),
    ({"a": {"on": 10, "asleep": 50, "off": 1}}, "cannot draw more than on"),
    ({"a": {"on": 10, "asleep": 5, "off": 1, "idle": 3}}, "unknown key(s) idle"),
    ({"a": 100}, "expected {on, asleep, off} watts"),
    ({"a": {True: 100, "asleep": 5, False: 1}}, 'write "on" and "off" in quotes'),
    ([1], "expected host -> {on, asleep, off} watts"),
])
def test_bad_figures_are_named(figures, words):
    with pytest.raises(EnergyError) as exc:
        check_figures(figures, "fig")
    assert words in str(exc.value) and str(exc.value).startswith("fig")


@pytest.mark.parametrize("text, words", [
    ("{", "h line 1 is not valid JSON"),
    ("[]", "h line 1: expected a JSON object"),
    (line("2026-11-25T00:00:00Z", {"a": "dozing"}), "h line 1: power must map hosts to one of"),
    (json.dumps({"gear": 1, "power": {}}), "h line 1: finished: expected an ISO time"),
])
def test_bad_history_lines_are_named(text, words):
    with pytest.raises(EnergyError, match=words):
        read_history([text], "h")


# --- measured watts (issue 34) ---------------------------------------------------------------
from ansible.module_utils.fleetnap import energy as _energy  # noqa: E402

DAY = "2026-11-26T10:00:00+00:00"


def test_readings_keep_the_last_five_per_state_and_the_median_is_the_baseline():
    m = {}
    for w in (210.0, 190.0, 200.0, 400.0, 205.0, 198.0):
        m = _energy.add_readings(m, {("web1", "on"): (w, "dcmi")}, DAY)
    assert m["web1"]["on"]["readings"] == [190.0, 200.0, 400.0, 205.0, 198.0]
    assert m["web1"]["on"]["watts"] == 200.0 and m["web1"]["on"]["source"] == "dcmi"
    m = _energy.add_readings(m, {("web1", "unknown"): (50.0, "dcmi"), ("web1", "asleep"): (None, None)}, DAY)
    assert set(m["web1"]) == {"on"}                      # no state to file it under, no reading
    assert _energy.check_measured(m, "f") == m


def test_measured_figures_replace_the_inventorys_per_state_and_say_so():
    inventory = {"web1": {"on": 130.0, "asleep": 5.0, "off": 3.0}, "web2": {"on": 120.0, "asleep": 4.0, "off": 2.0}}
    measured = _energy.add_readings({}, {("web1", "on"): (201.0, "Power"), ("web3", "on"): (99.0, "dcmi")}, DAY)
    used, sources = _energy.effective_figures(inventory, measured)
    assert used["web1"] == {"on": 201.0, "asleep": 5.0, "off": 3.0} and used["web2"] == inventory["web2"]
    assert sources["web1"] == {"on": "measured (Power, 2026-11-26)", "asleep": "inventory", "off": "inventory"}
    assert "web3" not in used and sources["web3"] == {"on": "measured (dcmi, 2026-11-26)", "asleep": "none",
                                                      "off": "none"}


@pytest.mark.parametrize("doc,words", [
    ([], "expected host -> state -> reading"),
    ({"h": {"idle": {}}}, "expected on / asleep / off"),
    ({"h": {"on": {"watts": 1}}}, "h.on: expected watts, readings, date and source"),
    ({"h": {"on": {"watts": 1, "readings": [], "date": DAY, "source": "dcmi"}}}, "h.on.readings"),
    ({"h": {"on": {"watts": 1, "readings": [1e9], "date": DAY, "source": "dcmi"}}}, "h.on.readings"),
    ({"h": {"on": {"watts": 1, "readings": [True], "date": DAY, "source": "dcmi"}}}, "h.on.readings"),
    ({"h": {"on": {"watts": 1, "readings": [1] * 6, "date": DAY, "source": "dcmi"}}}, "h.on.readings"),
    ({"h": {"on": {"watts": 1, "readings": [1], "date": DAY, "source": "guess"}}}, "h.on.source"),
    ({"h": {"on": {"watts": 1, "readings": [1], "date": "0001-01-01T00:00:00Z", "source": "dcmi"}}}, "h.on.date"),
])
def test_a_measured_file_that_is_not_one_is_refused_naming_the_entry(doc, words):
    with pytest.raises(_energy.EnergyError, match=words.replace(".", r"\.").replace("(", r"\(")):
        _energy.check_measured(doc, "f")


@pytest.mark.parametrize("watts,source", [(float("nan"), "dcmi"), (-1.0, "dcmi"), ("200", "dcmi"), (1.0, "guess")])
def test_a_reading_that_is_not_watts_is_not_kept(watts, source):
    with pytest.raises(_energy.EnergyError, match="cannot be kept"):
        _energy.add_readings({}, {("h", "on"): (watts, source)}, DAY)
