"""The census map's rules in the browser (attnviz/browser/census.mjs, run by node) against the library's
(attnviz.models.census.Census): the same numbers and thresholds give the same class for every head, the same KV cache
share and the same counts, as a person moves each threshold; with and without Wu et al.'s scores."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from attnviz.figures import long as drawn
from attnviz.models import census as heads_census
from test_census import RULES, synthetic  # noqa: F401  the five synthetic heads, a fixture
from test_weights_js import NODE, node_or_skip  # noqa: F401  node, or a skip (a failure where browsers are required)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import { classify, cacheShare, said } from "%s";
import { readFileSync, writeFileSync } from "node:fs";
const [data, ruleSets] = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = ruleSets.map((rules) => { const classes = classify(data, rules);
  return { classes, share: cacheShare(data, rules, classes), said: said(data, rules, classes) }; });
writeFileSync(process.argv[3], JSON.stringify(out));
"""


@pytest.mark.parametrize("with_wu", [False, True])
def test_the_browser_classifies_every_head_as_the_library_does_as_each_threshold_moves(synthetic, tmp_path,  # noqa: F811
                                                                                        with_wu):
    scan, _ = synthetic
    rng = np.random.default_rng(0)
    base = heads_census.census(scan, RULES, wu=rng.random((1, 5)) if with_wu else None)
    # many heads with numbers spread over every rule's range: the five synthetic ones, and random ones around them
    shape = (6, 10)
    found = heads_census.Census(
        n=700, long_from=128, sink=rng.random(shape) * 0.5, recent=rng.random(shape) * 0.5, distant=rng.random(shape),
        previous=rng.random(shape), local=rng.random(shape), entropy=rng.random(shape) * 8, recalls={},
        wu=rng.random(shape) if with_wu else None, rules=RULES, kv_group=2)
    settings = [{}, {"previous": 0.2}, {"local": 0.95}, {"streaming": 0.3}, {"retrieval": 0.9, "focus": 2.0},
                {"wu": 0.5}, {"previous": 1.0, "local": 1.0, "streaming": 1.0}]
    for case in (base, found):
        data = drawn.census_data(case, (0, 0))
        rule_sets = [{**data["rules"], **changed} for changed in settings]
        (tmp_path / "in.json").write_text(json.dumps([data, rule_sets]))
        (tmp_path / "run.mjs").write_text(SCRIPT % (ROOT / "attnviz" / "browser" / "census.mjs").as_uri())
        subprocess.run([NODE, str(tmp_path / "run.mjs"), str(tmp_path / "in.json"), str(tmp_path / "out.json")],
                       check=True, capture_output=True, text=True)
        for changed, got in zip(settings, json.loads((tmp_path / "out.json").read_text())):
            ruled = heads_census.with_rules(case, **changed)
            # the numbers go to the browser whole, so a head on a threshold falls the same side of it there
            assert got["classes"] == ruled.classify().ravel().tolist(), changed
            assert got["share"] == pytest.approx(ruled.cache_share(), abs=1e-12), changed
            counts = ruled.counts()
            assert ", ".join(f"{counts[c]:,} {heads_census.CLASS_NAMES[c]}" for c in heads_census.CLASSES) in got["said"]
