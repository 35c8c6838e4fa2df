"""build_app's options: what reaches Ray's deployment config, and a clear refusal of what is not an option."""

import pytest

pytest.importorskip("ray")

from llamay.native.ray.deployment import INGRESS_SPARE, build_app


def engine_config(app):
    return app._bound_deployment.init_args[0]._bound_deployment._deployment_config


def test_replicas_routing_and_limits_reach_ray():
    app = build_app({"replicas": 3, "parallel": 2, "queue": 5})
    c = engine_config(app)
    assert c.num_replicas == 3 and c.autoscaling_config is None
    assert c.max_ongoing_requests == 7 and c.max_queued_requests == 5  # a replica's batch and queue; the ingress's
    # the ingress relays all of that at once (not Ray's default 5), and a few more (/health, a 429's retry)
    ingress = app._bound_deployment._deployment_config
    assert ingress.max_ongoing_requests == 3 * 7 + 5 + INGRESS_SPARE and ingress.max_queued_requests == 5
    scaled = build_app({"replicas": 1, "max_replicas": 4, "parallel": 2, "queue": 5})._bound_deployment
    assert scaled._deployment_config.max_ongoing_requests == 4 * 7 + 5 + INGRESS_SPARE
    assert c.request_router_config.request_router_class == "llamay.native.ray.router:PrefixRouter"
    assert engine_config(build_app({"routing": "random"})).request_router_config.request_router_class.endswith(
        ":RandomRouter"
    )
    default = engine_config(build_app({"routing": "default"})).request_router_config.request_router_class
    assert "PowerOfTwoChoices" in str(default)  # Ray's own


def test_autoscaling_options_pass_through_to_ray():
    c = engine_config(build_app({"replicas": 2, "max_replicas": 4, "autoscaling": {"upscale_delay_s": 7}}))
    a = c.autoscaling_config
    assert (a.min_replicas, a.initial_replicas, a.max_replicas, a.upscale_delay_s) == (1, 2, 4, 7)
    assert a.target_ongoing_requests == 4  # the default decode batch: busy beyond it


@pytest.mark.parametrize(
    ("args", "named"),
    [({"bogus": 1}, "bogus"), ({"routing": "round-robin"}, "routing"),
     ({"autoscaling": {"upscale_dealy_s": 1}}, "upscale_dealy_s"),
     ({"autoscaling": {"min_replicas": -1}}, "min_replicas")],
)  # fmt: skip
def test_bad_options_are_refused_by_name(args, named):
    with pytest.raises(ValueError, match=named):
        build_app(args)
