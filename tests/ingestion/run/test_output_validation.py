"""Output validation rules, each on a hand-made batch."""

import numpy as np
import pytest

from challenge_welding.ingestion.handover.child import to_plain
from challenge_welding.ingestion.run.validate import Notes, OutputError, validate_output

IDS = ["a", "b"]


def test_reference_solution_style_numpy_outputs_are_accepted():
    # the published reference solution: list of numpy arrays, numpy float OOD scores
    out = {"predictions": ["KO", "UNKNOWN"],
           "probabilities": [np.array([0.7, 0.3, 0.0]), np.array([0.25, 0.25, 0.5])],
           "OOD_scores": [np.float64(0.2), np.float64(1.5)]}
    for candidate in (out, to_plain(out)):
        notes = Notes()
        v = validate_output(candidate, IDS, notes)
        assert v.states == ["KO", "UNKNOWN"]
        np.testing.assert_array_equal(v.probabilities, [[0.7, 0.3, 0.0], [0.25, 0.25, 0.5]])
        np.testing.assert_array_equal(v.ood, [0.2, 1.5])
        assert notes.counts == {}


def test_missing_probabilities_and_ood_are_one_hot_and_zero():
    notes = Notes()
    v = validate_output({"predictions": ("OK", "UNKNOWN")}, IDS, notes)
    np.testing.assert_array_equal(v.probabilities, [[0, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(v.ood, [0, 0])
    assert notes.counts == {"probabilities missing, one-hot of the prediction used": 2,
                            "OOD_scores missing, 0 used": 2}


def test_labels_are_normalised_with_a_warning():
    notes = Notes()
    v = validate_output({"predictions": np.array([" ko", "Unknown\n"])}, IDS, notes)
    assert v.states == ["KO", "UNKNOWN"]
    assert notes.counts == {"labels normalised (case/whitespace)": 2,
                            "probabilities missing, one-hot of the prediction used": 2,
                            "OOD_scores missing, 0 used": 2}
    assert notes.lines("perf: ")[0] == \
        "perf: labels normalised (case/whitespace): 2 sample(s), e.g. ' ko' -> 'KO'"


def test_rows_off_one_are_renormalised_within_tolerance_kept():
    notes = Notes()
    v = validate_output({"predictions": ["KO", "OK"],
                         "probabilities": [[1, 1, 2], [0.2, 0.8005, 0]]}, IDS, notes)
    # issue 28: a row within the tolerance is normalised too (silently): every accepted row sums to 1
    np.testing.assert_allclose(v.probabilities, [[0.25, 0.25, 0.5], [0.2 / 1.0005, 0.8005 / 1.0005, 0]])
    assert notes.counts == {"probabilities renormalised (row sum off 1 by more than 1e-3)": 1,
                            "OOD_scores missing, 0 used": 2}
    assert notes.examples["probabilities renormalised (row sum off 1 by more than 1e-3)"] == "a sum 4"


def test_negative_ood_scores_are_clipped_column_vectors_accepted():
    notes = Notes()
    v = validate_output({"predictions": ["KO", "OK"], "OOD_scores": np.array([[-0.5], [2.0]])},
                        IDS, notes)
    np.testing.assert_array_equal(v.ood, [0.0, 2.0])
    assert notes.counts["negative OOD scores clipped to 0"] == 1


@pytest.mark.parametrize("output,message", [
    ("OK", "must return a dict"),
    ({"probabilities": [[1, 0, 0]] * 2}, "returned no 'predictions'"),
    ({"predictions": ["OK"]}, "'predictions' has 1 entries for a batch of 2 images"),
    ({"predictions": "OKOK"}, "'predictions' must be a list"),
    ({"predictions": ["OK", "DEFECT"]}, "sample b: prediction 'DEFECT' is not one of KO, OK, UNKNOWN"),
    ({"predictions": ["OK", 1]}, "sample b: prediction 1 is not one of"),
    ({"predictions": ["OK", "OK"], "probabilities": [[0.5, 0.5, 0], [np.nan, 1, 0]]},
     "sample b: probabilities contain NaN or infinity"),
    ({"predictions": ["OK", "OK"], "probabilities": [[0.5, 0.5, 0], [np.inf, 1, 0]]},
     "sample b: probabilities contain NaN or infinity"),
    ({"predictions": ["OK", "OK"], "probabilities": [[-0.1, 1.1, 0], [0, 1, 0]]},
     "sample a: negative probability"),
    ({"predictions": ["OK", "OK"], "probabilities": [[0, 0, 0], [0, 1, 0]]},
     "sample a: probabilities are all zero"),
    ({"predictions": ["OK", "OK"], "probabilities": [[0.5, 0.5], [0, 1, 0]]},
     "sample a: probabilities must be 3 numbers"),
    ({"predictions": ["OK", "OK"], "probabilities": [[0, 1, 0]] * 3}, "'probabilities' has 3 entries"),
    ({"predictions": ["OK", "OK"], "OOD_scores": [0.1, float("nan")]}, "sample b: OOD score is nan"),
    ({"predictions": ["OK", "OK"], "OOD_scores": [0.1, "high"]}, "sample b: OOD score must be a number"),
    ({"predictions": ["OK", "OK"], "OOD_scores": [0.1, {"__unsupported__": "Tensor: t"}]},
     "unsupported object (Tensor: t)"),
])
def test_errors_name_the_sample_and_the_field(output, message):
    with pytest.raises(OutputError) as info:
        validate_output(output, IDS)
    assert message in str(info.value)


def test_to_plain_turns_numpy_into_python_and_marks_foreign_objects():
    plain = to_plain({"p": np.float32(0.5), "a": np.array([[1, 2]]), "t": (np.str_("OK"),),
                      "o": object()})
    assert plain["p"] == 0.5 and type(plain["p"]) is float
    assert plain["a"] == [[1, 2]] and plain["t"] == ["OK"]
    assert plain["o"]["__unsupported__"].startswith("object: <object object")


def test_length_message_leaves_the_sample_range_to_the_caller():
    """The ingestion's message names the set and the batch's samples once; this part does not repeat them."""
    with pytest.raises(OutputError) as info:
        validate_output({"predictions": ["OK"]}, IDS)
    assert str(info.value) == "'predictions' has 1 entries for a batch of 2 images"
