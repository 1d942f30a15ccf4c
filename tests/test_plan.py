import pytest

from topicaudit.errors import UserError
from topicaudit.engine.execution.plan import make_plan
from topicaudit.engine.storage.bounded_read import read_arrays
from topicaudit.engine.storage.rundir import RunDirectory


@pytest.mark.parametrize("n_docs, n_shadows", [(10, 2), (11, 8), (5698, 128)])
def test_every_document_is_in_exactly_half_the_shadows(n_docs, n_shadows):
    plan = make_plan(n_docs, n_shadows, seed=1)
    assert plan.shadow_in.shape == (n_shadows, n_docs)
    assert (plan.shadow_in.sum(axis=0) == n_shadows // 2).all()
    # pairs are complements, each half as even as the corpus allows
    assert (plan.shadow_in[0::2] ^ plan.shadow_in[1::2]).all()
    assert set(plan.shadow_in.sum(axis=1)) <= {n_docs // 2, n_docs - n_docs // 2}


def test_target_membership_is_a_fair_coin_per_document():
    plan = make_plan(20000, 2, seed=0)
    assert abs(plan.target_in.mean() - 0.5) < 0.02
    # independent of the shadow halves
    assert abs((plan.target_in & plan.shadow_in[0]).mean() - 0.25) < 0.02


def test_same_seed_same_plan_and_different_seed_different_plan():
    a, b, c = make_plan(500, 16, 7), make_plan(500, 16, 7), make_plan(500, 16, 8)
    assert (a.target_in == b.target_in).all() and (a.shadow_in == b.shadow_in).all()
    assert (a.shadow_seeds == b.shadow_seeds).all() and a.target_seed == b.target_seed
    assert not (a.target_in == c.target_in).all()
    assert not (a.shadow_in == c.shadow_in).all()
    assert len(set(a.shadow_seeds.tolist()) | {a.target_seed}) == 17


def test_shadow_i_does_not_depend_on_how_many_shadows_there_are():
    small, large = make_plan(300, 4, 3), make_plan(300, 10, 3)
    assert (small.shadow_in == large.shadow_in[:4]).all()
    assert (small.shadow_seeds == large.shadow_seeds[:4]).all()


def test_the_run_directory_keeps_the_plan_and_refuses_another(tmp_path):
    plan = make_plan(50, 6, 2)
    run = RunDirectory(tmp_path)
    run.keep_plan(plan.arrays())
    back = read_arrays(tmp_path / "plan.npz")
    assert int(back["seed"]) == 2 and int(back["target_seed"]) == plan.target_seed
    assert (back["shadow_in"] == plan.shadow_in).all() and (back["shadow_seeds"] == plan.shadow_seeds).all()
    run.keep_plan(plan.arrays())  # resuming: the same plan is accepted
    with pytest.raises(UserError, match="not the plan of this configuration"):
        run.keep_plan(make_plan(50, 6, 3).arrays())


@pytest.mark.parametrize("n_shadows", [0, 1, 3, 7])
def test_odd_or_too_few_shadows_are_refused(n_shadows):
    with pytest.raises(UserError, match="even number"):
        make_plan(100, n_shadows, 0)
