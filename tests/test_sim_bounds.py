"""The simulator states the compute and interconnect physics it models as well as its bandwidth
(issue 48: sim/model.py Model.physics and floor_bounds_ms), and the share the agent computes from
/server_info - through tools/bench/floor.py, its own path - agrees with the simulator's own at every
level, bound by bound: on the reference box (memory-bound at every level) and on boxes whose slow
link or small peak takes over at high concurrency."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim import profile
from sim.space import DEFAULT_BASE_FLAGS, DEFAULT_LEVELS, default_space
from sim.truth import baseline_of, floor_share, level_throughput, model_of
from tests.test_physics import _argv, sim_server_info
from tools.bench.floor import engine_physics, with_floor
from tools.bench.schema import Point, Workload

# the reference box with PCIe Gen3's 16 GB/s between GPUs, and one with a tenth of the peak
SLOW_LINK = 'hardware = "reference"\n[constants]\nlink_gb_s = 16.0\n'
SMALL_PEAK = 'hardware = "reference"\n[constants]\npeak_tflops = 8.0\n'


def test_the_reference_box_states_its_peak_and_link_and_stays_memory_bound() -> None:
    model = model_of(baseline_of(default_space()))
    physics = model.physics
    assert physics is not None
    assert (physics["peak_tflops"], physics["link_gb_s"]) == (835.0, 64.0)
    assert (physics["hidden"], physics["layers"]) == (7168, 61)
    for c in DEFAULT_LEVELS:
        assert model.floor_bound(c, 512 + 256) == "memory", c
    # C=250: two all-reduces a layer of 250 x 7168 x 2 bytes, 7/8 of it sent, over 64 GB/s
    link = model.floor_bounds_ms(250, 768)["interconnect"]
    assert link == pytest.approx(61 * 4 * 7 / 8 * 250 * 7168 * 2 / 64e9 * 1000)
    # a profile that changes the box keeps none of the base box's peak or link it does not state
    cpu = profile.parse({"constants": {"gpus": 1, "mem_bw_gb_s": 300.0}}).hardware
    assert (cpu.peak_tflops, cpu.link_gb_s) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("text", "bound"), [(SLOW_LINK, "interconnect"), (SMALL_PEAK, "compute"), ("", "memory")]
)
def test_the_agent_s_share_agrees_with_the_simulator_bound_by_bound(
    tmp_path: Path, text: str, bound: str
) -> None:
    config = baseline_of(default_space())
    extra: list[str] = []
    if text:
        (tmp_path / "box.toml").write_text(text)
        extra = ["--profile", str(tmp_path / "box.toml")]
    physics = engine_physics(sim_server_info(tmp_path, *_argv(config), *extra))
    assert physics is not None
    model = model_of(config, [*DEFAULT_BASE_FLAGS, *extra])
    wl = Workload(input_len=512, max_tokens=512)
    seen = set()
    for c in DEFAULT_LEVELS:
        assert model.decode_ms(c) > model.floor_ms(c, 768), c  # the step sits above its floor
        point = Point(
            max_concurrency=c,
            completed=c,
            total_input_tokens=512 * c,
            total_output_tokens=512 * c,
            output_throughput=level_throughput(model, c),
        )
        reported = with_floor(point, physics, wl)
        assert reported.floor_share == pytest.approx(floor_share(model, c), rel=0.05), c
        assert reported.floor_bound == model.floor_bound(c, 768), c
        seen.add(reported.floor_bound)
    assert bound in seen
