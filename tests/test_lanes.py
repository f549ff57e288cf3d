"""The test lanes (docs/contributing.md): which tests the quick lane leaves out, and the
guard that keeps a fake lab out of it."""

import pytest

from fakes import fake_lab, lab_fixture


@pytest.fixture
def through_another_fixture(lab):
    return lab


@lab_fixture
def a_lab_fixture_of_this_module(tmp_path):
    return tmp_path


def test_a_test_using_the_fake_lab_is_in_the_lab_lane(lab, request):
    assert request.node.get_closest_marker("lab") is not None


def test_a_lab_fixture_marks_the_tests_that_reach_it_through_another(through_another_fixture, request):
    assert request.node.get_closest_marker("lab") is not None


def test_a_fixture_made_with_lab_fixture_marks_its_tests(a_lab_fixture_of_this_module, request):
    assert request.node.get_closest_marker("lab") is not None


def test_a_test_without_one_is_in_the_quick_lane(request):
    assert request.node.get_closest_marker("lab") is None


def test_a_quick_test_that_makes_a_fake_lab_fails_at_once_saying_how_to_move_it(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="lab_fixture, or mark it @pytest.mark.lab"):
        fake_lab(tmp_path, monkeypatch)
    assert not (tmp_path / "cache").exists()   # refused before it made anything
