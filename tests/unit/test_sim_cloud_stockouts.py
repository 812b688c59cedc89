"""The simulated clouds' stockouts (issue 25 item 2): a zone out of capacity, of every machine
type or of one, until cleared; the GKE fake fails a node pool there as GKE does."""

from __future__ import annotations

from modelfleet.sim.clouds.faults import Stockout, Stockouts


def test_the_simulated_cloud_stocks_out_a_zone_or_a_machine_type_in_it() -> None:
    out = Stockouts([Stockout(zone="us-central1-a")])
    assert out.exhausted(["us-central1-a"], "a3-highgpu-8g") == "us-central1-a"
    assert out.exhausted(["us-central1-b"], "a3-highgpu-8g") is None
    out.add(Stockout(zone="us-central1-b", machine="a3-highgpu-8g"))
    assert out.exhausted(["us-central1-c", "us-central1-b"], "a3-highgpu-8g") == "us-central1-b"
    assert out.exhausted(["us-central1-b"], "a2-ultragpu-8g") is None
    out.clear()
    assert out.exhausted(["us-central1-a"], None) is None
