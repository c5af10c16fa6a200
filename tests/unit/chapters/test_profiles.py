"""Profiles, parameter resolution and the command line's answers to bad input."""

import os
import re

import pytest
import torch

from qkov_lib.__main__ import main
from qkov_lib.core import device
from qkov_lib.core.chapter import PROFILES, ParameterError, as_dict, concrete_profile, parse_value
from qkov_lib.runner.catalog import CHAPTERS, resolve, split_overrides

FIG4 = "fig4_mu_trajectories"


def test_auto_is_paper_on_gpu_else_default():
    assert concrete_profile("auto", has_gpu=True) == "paper"
    assert concrete_profile("auto", has_gpu=False) == "default"
    assert concrete_profile("smoke") == "smoke"


def test_every_profile_resolves_for_every_chapter():
    for chapter in CHAPTERS:
        for profile in PROFILES:
            assert resolve(chapter, profile)[0] == profile


def test_paper_profile_is_the_paper_setting():
    _, s = resolve(FIG4, "paper")
    assert (s.m, s.n, s.b, s.M, s.eta_ov) == (5, 50, 50, 5, 1.0)
    assert s.ratios == (0.01, 0.1, 1.0, 10.0, 100.0) and s.target_loss == 1e-4
    assert resolve(FIG4, "official")[1].M == 20
    assert resolve(FIG4, "smoke")[1].target_loss == 1e-3


def test_overrides_apply_and_keep_types():
    _, s = resolve(FIG4, "default", {"M": 20, "eta_ov": 2, "ratios": [1, 10]})
    assert s.M == 20 and s.eta_ov == 2.0 and isinstance(s.eta_ov, float) and s.ratios == (1.0, 10.0)
    assert as_dict(s)["ratios"] == [1.0, 10.0]  # the metadata's plain form


def test_every_setup_field_has_a_comment_and_every_profile_names_real_parameters():
    """A chapter's Setup says where each default comes from (a comment on its line), and its profiles change only
    parameters it has."""
    import ast
    import inspect

    from qkov_lib.core.chapter import parameters

    for name, module in CHAPTERS.items():
        source = inspect.getsource(module.Setup)
        for node in ast.parse(source).body[0].body:
            if isinstance(node, ast.AnnAssign):
                line = source.splitlines()[node.end_lineno - 1]
                assert "#" in line, f"{name}.Setup.{node.target.id} has no comment saying where its value comes from"
        for profile, changes in module.PROFILES.items():
            assert profile in PROFILES and set(changes) <= set(parameters(module.Setup)), (name, profile)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"bogus": 1}, "unknown parameter 'bogus'.*allowed: m, n, b, M"),
        ({"M": "five"}, "parameter 'M' .* must be an int"),
        ({"ratios": [0.0, 1.0]}, "ratios must contain only finite numbers > 0"),
        ({"ratios": [-1.0]}, "ratios must contain only finite numbers > 0"),
        ({"ratios": []}, "ratios must be a non-empty list"),
        ({"m": 0}, "m must be a positive integer"),
        ({"n": -5}, "n must be a positive integer"),
        ({"target_loss": 2.0}, r"target_loss must lie in \(0, log M\)"),
        ({"table_losses": [0.1, 0.0]}, "table_losses must contain only finite numbers > 0"),
        ({"table_losses": [0.1, 1.7]}, r"each of table_losses must lie in \(0, log M\) = \(0, 1.609\)"),
        ({"table_losses": [1e-5]}, "table_losses must all be >= target_loss"),
        ({"time_axis": "weird"}, "time_axis must be 'normalised' or 'raw'"),
    ],
)
def test_bad_parameters(overrides, message):
    with pytest.raises(ParameterError, match=message):
        resolve(FIG4, "default", overrides)


def test_placeholder_parameters_take_none_or_their_own_type():
    """A parameter whose paper value is None takes None or its own type: the atlas's scheduler a string, its
    workers and Figure 2's seq_len_gh an int."""
    assert resolve("atlas", "default")[1].scheduler is None
    _, s = resolve("atlas", "default", {"scheduler": "tcp://10.0.0.5:8786", "workers": 3})
    assert s.scheduler == "tcp://10.0.0.5:8786" and s.workers == 3
    for overrides, message in [
        ({"scheduler": 3}, "'scheduler' of atlas must be a str or None"),
        ({"scheduler": ""}, "scheduler must be None, 'serial' or a scheduler address"),
        ({"workers": 0}, r"workers must be None \(one per core\) or an integer >= 1"),
        ({"workers": "two"}, "'workers' of atlas must be an int or None"),
        ({"workers": True}, "'workers' of atlas must be an int or None"),
    ]:
        with pytest.raises(ParameterError, match=message):
            resolve("atlas", "default", overrides)
    with pytest.raises(ParameterError, match="'seq_len_gh' of fig2_dtap must be an int or None"):
        resolve("fig2_dtap", "default", {"seq_len_gh": "long"})


@pytest.mark.parametrize(
    "chapter, overrides, message",
    [
        ("fig2_dtap", {"seeds": "x"}, r"'seeds' of fig2_dtap must be a list of ints like"),
        ("fig2_dtap", {"panel_steps": 3}, r"'panel_steps' of fig2_dtap must be a mapping to ints like"),
        ("fig2_dtap", {"panel_stop": 3}, r"must be a mapping to values, each an int or None like"),
        ("atlas", {"inits": 3}, r"'inits' of atlas must be a list of lists of 2 values like"),
        ("atlas", {"mult_sets": [[10.0, 20.0, 5.0]]}, r"'mult_sets' of atlas must be a list of lists of 4 values like"),
        ("atlas", {"mult_sets": [[10.0, 20.0, 5.0, -1.0]]}, r"mult_sets: the QK multiplier ramp_h must be a finite"),
        ("atlas", {"inits": [["bogus", 1.0]]}, r"inits, each \[kind, scale\]: unknown init 'bogus'; allowed"),
    ],
)
def test_a_wrong_type_is_described_in_plain_words(chapter, overrides, message):
    """The type a parameter must have, in words a reader can follow: plurals of nested lists and mappings."""
    with pytest.raises(ParameterError, match=message):
        resolve(chapter, "smoke", overrides)


def test_unknown_profile_and_chapter():
    with pytest.raises(ParameterError, match="unknown profile 'fast'; allowed: smoke, default, paper, official, auto"):
        resolve(FIG4, "fast")
    with pytest.raises(ParameterError, match="unknown chapter 'fig9'"):
        resolve("fig9", "default")


def test_split_overrides_rejects_names_no_chapter_takes():
    assert split_overrides([FIG4], [("M", 20)]) == {FIG4: {"M": 20}}
    with pytest.raises(ParameterError, match="unknown parameter 'lr' in -p"):
        split_overrides([FIG4], [("lr", 0.1)])


def test_parse_value():
    assert parse_value("20") == 20 and parse_value("1e-3") == 1e-3
    assert parse_value("[0.1, 10]") == [0.1, 10] and parse_value("raw") == "raw"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["reproduce", "--profile", "fast"], "error: unknown profile 'fast'"),
        (["reproduce", "-p", "nope", "1"], "error: unknown parameter 'nope' in -p"),
        (["reproduce", "-p", "ratios", "[0, 1]"], "error: ratios must contain only finite numbers > 0"),
        (["reproduce", "-p", "m", "0"], "error: m must be a positive integer"),
        (["reproduce", "-p", "target_loss", "3"], r"error: target_loss must lie in \(0, log M\)"),
        (["reproduce", "--only", "fig9"], "error: unknown chapter 'fig9'"),
    ],
)
def test_cli_bad_input_exits_2_with_one_message(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "nb"), "--results", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1
    assert __import__("re").search(message, err)
    assert not (tmp_path / "res").exists() and not (tmp_path / "nb").exists()


def test_device_choice(monkeypatch):
    monkeypatch.delenv(device.ENV_VAR, raising=False)
    expected = "cuda" if torch.cuda.is_available() else device.pick_device().type
    assert device.pick_device().type == expected
    monkeypatch.setenv(device.ENV_VAR, "cpu")
    assert device.pick_device().type == "cpu"
    monkeypatch.setenv(device.ENV_VAR, "tpu")
    with pytest.raises(ValueError, match="allowed: cpu, cuda, mps"):
        device.pick_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv(device.ENV_VAR, "cuda")
        with pytest.raises(RuntimeError, match="not available here"):
            device.pick_device()
    info = device.describe(torch.device("cpu"))
    assert info["device"] == "cpu" and info["torch"] == torch.__version__
    if os.path.exists("/proc/cpuinfo"):  # a generic CPU name still gets its family, model and feature digest
        assert re.fullmatch(r"\S+ family \S+ model \S+ stepping \S+, flags [0-9a-f]{12}", info["cpu_id"])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"mult_e": 0.0}, r"the QK multiplier mult_e must be a finite number > 0"),
        ({"ramp_h": -1.0}, r"the QK multiplier ramp_h"),
        ({"bins": [0.0, 0.5, 1.5]}, r"bins must lie in \[0, 1\]"),
        ({"bins": [0.0, 0.6, 0.4, 1.0]}, "bins must be strictly increasing"),
        ({"gamma": 1.2}, r"gamma .* must lie in \(0, 1\)"),
        ({"seq_len": 1}, "seq_len must be an integer >= 2"),
        ({"vocab_size": 40}, "vocab_size = 40 cannot hold the 58 tokens"),
        ({"init": "orthogonal"}, "unknown init 'orthogonal'"),
        ({"seeds": [1, 1]}, "seeds must be a non-empty list of distinct integers"),
        ({"batch_size": 10_000}, "batch_size = 10000 exceeds n_train = 6400"),
        ({"lr": 0.0}, "lr must be a finite number > 0"),
    ],
)
def test_bad_figure2_parameters(overrides, message):
    with pytest.raises(ParameterError, match=message):
        resolve("fig2_dtap", "default", overrides)


def test_figure2_profiles():
    assert resolve("fig2_dtap", "paper")[1].lr == 0.01
    official = resolve("fig2_dtap", "official")[1]
    assert official.layout == "official" and official.vocab_size == 50 and official.mult_e == 20.0


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"alphas": [0.2, 1.5]}, r"alphas must be a non-empty list of distinct numbers in \[0, 1\]"),
        ({"alphas": []}, "alphas must be a non-empty list"),
        ({"delta": 0.0}, r"delta must lie in \(0, 0.1\]"),
        ({"others": "query"}, "others must be one of common, all"),
        ({"check_epoch": 501}, r"check_epoch in \[1, epochs\]"),
        ({"gamma": 0.0}, r"gamma .* must lie in \(0, 1\)"),
        ({"batch_size": 2}, r"batch_size must lie in \[n_classes, n_train\]"),
    ],
)
def test_bad_figure3_parameters(overrides, message):
    with pytest.raises(ParameterError, match=message):
        resolve("fig3_incentive", "default", overrides)


def test_table5_sets_each_depth_as_the_authors_did_under_official_and_checks_depth_settings():
    """``depth_settings``: a depth's own settings over the chapter's. ``official``: two layers at the stored models'
    sizes with the MLP frozen in the faster run (the 1-layer notebooks' training), four at the 1-layer sizes with it
    trained (the 4-layer notebooks), one encoding of 96 tokens for both."""
    s = resolve("hatexplain_layers", "official")[1]
    two, four = s.at_depth(2), s.at_depth(4)
    assert s.layer_counts == (2, 4) and (two.n_layers, four.n_layers) == (2, 4)
    assert (two.d_model, two.d_head, two.d_mlp, two.faster_frozen) == (32, 8, 128, "mlp")
    assert (four.d_model, four.d_head, four.d_mlp, four.faster_frozen) == (64, 64, 256, "none")
    assert two.max_len == four.max_len == 96 and two.lr == four.lr == 5e-5
    notebook = resolve("hatexplain_layers", "smoke", {"depth_settings": {"2": {"epochs": 2}}})[1]  # JSON's text keys
    assert notebook.at_depth(2).epochs == 2 and notebook.epochs != 2
    for bad in ({"3": {"epochs": 2}}, {"2": {"max_len": 64}}, {"2": {"n_layers": 3}}, {"2": {"seeds": [1]}}):
        with pytest.raises(ParameterError, match="depth_settings must map depths of layer_counts"):
            resolve("hatexplain_layers", "smoke", {"depth_settings": bad})
    with pytest.raises(ParameterError, match="depth_settings"):
        resolve("hatexplain_layers", "smoke", {"depth_settings": {"2": 3}})
    with pytest.raises(ParameterError, match="epochs"):  # a depth's value is checked as the 1-layer chapter checks it
        resolve("hatexplain_layers", "smoke", {"depth_settings": {"2": {"epochs": 0}}})
    with pytest.raises(ParameterError, match="epochs must be an int"):
        resolve("hatexplain_layers", "smoke", {"depth_settings": {"2": {"epochs": "two"}}})
    listed = resolve("hatexplain_layers", "smoke", {"depth_settings": {"2": {"k_percents": [5, 10]}}})[1]
    assert listed.at_depth(2).k_percents == (5.0, 10.0)  # typed as the field is: a tuple of floats
