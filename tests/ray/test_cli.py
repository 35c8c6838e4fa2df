"""`llamay ray` and `llamay serve --ray` (the same command): options checked by name before anything starts."""

import pytest

pytest.importorskip("ray")

from llamay.native.cli import build_parser, main, serve_on_ray
from llamay.native.commands.ray_serve import options


def test_serve_with_ray_is_the_ray_command_with_its_options():
    parser = build_parser()
    argv = serve_on_ray(parser, ["serve", "-m", "smollm2", "--ray", "--replicas", "3", "--routing=random", "-t", "2"])
    assert argv == ["ray", "-m", "smollm2", "--replicas", "3", "--routing=random", "-t", "2"]
    o = options(parser.parse_args(argv))
    assert (o["model"], o["replicas"], o["routing"], o["threads"]) == ("smollm2", 3, "random", 2)


@pytest.mark.parametrize("option", ["--embedding-model", "--snapshot-dir", "--prefill-chunk", "--timeout"])
def test_serve_options_the_ray_application_does_not_take_are_refused_by_name(option, capsys):
    with pytest.raises(SystemExit) as e:
        main(["serve", "--ray", f"{option}=1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert option in err and "llamay ray" in err


def test_an_option_neither_knows_is_argparses_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["serve", "--ray", "--replcas", "2"])
    assert e.value.code == 2 and "--replcas" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "named"), [(["--replicas", "0"], "--replicas"), (["--num-cpus", "-1"], "--num-cpus"),
                                             (["--routing", "nearest"], "--routing")])  # fmt: skip
def test_bad_values_are_refused_before_ray_starts(argv, named, capsys):
    try:
        status = main(["ray", *argv])
    except SystemExit as e:  # argparse's refusal (a choice)
        status = e.code
    assert status in (1, 2) and named in capsys.readouterr().err
