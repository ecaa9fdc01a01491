"""The wire format's codec and checks on hand-made byte strings (ingestion/handover/wire.py, child.py),
and the map reduction shared by the child and the scorer."""

import json
import socket
import struct
import time

import numpy as np
import pytest

from challenge_welding.contract import explanation_maps as xio
from challenge_welding.ingestion.handover import child, wire


def test_map_scale_and_reduction_are_the_same_on_both_sides():
    assert child.MAP_SCALE == xio.MAP_SCALE == 4
    rng = np.random.default_rng(0)
    for h, w in [(1, 1), (3, 7), (4, 4), (5, 9), (36, 64), (27, 48), (1080 // 8, 1920 // 8)]:
        m = rng.random((h, w))
        np.testing.assert_array_equal(child.reduce_map(m), xio.reduce_map(m))
        assert xio.reduce_map(m).shape == xio.reduced_shape(h, w)


def test_reduction_by_hand():
    # 5 x 9: one row of blocks (5 // 4 = 1: all 5 rows), two columns of blocks: cols 0..3
    # (4 wide) and 4..8 (the last block takes the leftover column: 5 wide)
    m = np.zeros((5, 9))
    m[0, 0] = 1.0  # block (0, 0): 1 / 20 = 0.05 -> 255 * 0.05 = 12.75 -> 13
    m[4, 8] = 1.0  # block (0, 1): 1 / 25 = 0.04 -> 10.2 -> 10
    assert xio.reduce_map(m).tolist() == [[13, 10]]
    # 8 x 8 in four 4x4 blocks of constant value
    m = np.block([[np.full((4, 4), 0.0), np.full((4, 4), 1.0)],
                  [np.full((4, 4), 0.5), np.full((4, 4), 0.2)]])
    assert xio.reduce_map(m).tolist() == [[0, 255], [128, 51]]  # 127.5 rounds to even: 128


def test_nesting_counts_brackets_outside_strings():
    assert wire.nesting(b'{"a":[1,[2]]}') == 3
    assert wire.nesting(b'{"a":"[[[[{{"}') == 1
    assert wire.nesting(b'{"a":"\\"[[", "b":[]}') == 2  # an escaped quote does not end the string
    assert wire.nesting(b'"just a string"') == 0


@pytest.mark.parametrize("data, message", [
    (b"null", "not an object with an 'op'"),
    (b"[1, 2]", "not an object with an 'op'"),
    (b'{"op": 3}', "not an object with an 'op'"),
    (b"\xff\xfe", "not JSON (UnicodeDecodeError)"),
    (b'{"op": "result", ', "not JSON (JSONDecodeError)"),
    (b"[" * 30000 + b"]" * 30000, "nested 30000 levels deep (at most 16)"),
    (b'{"op": "x", "n": ' + b"9" * 5000 + b"}", "not JSON (ValueError)"),  # int digit limit
])
def test_bad_headers_are_one_line_errors(data, message):
    with pytest.raises(wire.WireError) as info:
        wire.parse_header(data)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_good_header_parses():
    assert wire.parse_header(b'{"op": "idle", "id": 2, "nonce": "ab"}') == \
        {"op": "idle", "id": 2, "nonce": "ab"}


def _pair():
    a, b = socket.socketpair()
    return wire.Channel(a), b


def test_announced_size_is_checked_before_reading():
    chan, peer = _pair()
    peer.sendall(struct.pack("!Q", 2 ** 60))
    with pytest.raises(wire.WireError, match=r"header of 1152921504606846976 bytes was announced "
                                             r"\(at most 65536\)"):
        chan.read_header(child.header_cap(0), time.monotonic() + 5, lambda: True)


def test_trickle_times_out_and_close_is_closed():
    chan, peer = _pair()
    peer.sendall(struct.pack("!Q", 10) + b"{")  # 1 byte of 10, then silence
    t0 = time.monotonic()
    with pytest.raises(wire.Timeout):
        chan.read_header(child.header_cap(0), time.monotonic() + 0.5, lambda: True)
    assert time.monotonic() - t0 < 2
    chan, peer = _pair()
    peer.sendall(struct.pack("!Q", 10))
    peer.close()
    with pytest.raises(wire.Closed):
        chan.read_header(child.header_cap(0), None, lambda: True)


def test_round_trip_of_a_result_with_arrays():
    chan, peer = _pair()
    probs, ood = np.arange(6.0).reshape(2, 3), np.array([0.5, 2.0])
    header = {"op": "result", "id": 4, "nonce": "n1", "seconds": 0.25, "ignored": [],
              "maps": False, "error": None, "output": {"predictions": ["OK", "KO"]}}
    child.send(peer, header, [("probabilities", probs), ("OOD_scores", ood)])
    got = chan.read_header(child.header_cap(2), time.monotonic() + 5, lambda: True)
    arrays = wire.check_result(got, 4, "n1", 2)
    values = chan.read_arrays(arrays, time.monotonic() + 5, lambda: True)
    np.testing.assert_array_equal(values[0], probs)
    np.testing.assert_array_equal(values[1], ood)


def _result(**change):
    h = {"op": "result", "id": 1, "nonce": "x", "seconds": 0.1, "ignored": [], "maps": False,
         "error": None, "output": {}, "arrays": []}
    h.update(change)
    return h


@pytest.mark.parametrize("header, message", [
    (_result(id=2), "answered batch 2 while batch 1 was handed over"),
    (_result(id=True), "answered batch True while batch 1 was handed over"),
    (_result(nonce="y"), "not written for this hand-over"),
    (_result(op="idle"), "sent 'idle' while the answer to batch 1 was awaited"),
    (_result(seconds="0"), "'seconds' of a result message is '0'"),
    (_result(ignored="abc"), "'ignored' of a result message is 'abc'"),
    (_result(maps=1), "'maps' of a result message is 1"),
    (_result(arrays=[{"name": "probabilities", "dtype": "<f4", "shape": [3, 3]}]),
     "array 'probabilities' of a result message is '<f4' [3, 3], expected <f8 [3, 3]"),
    (_result(arrays=[{"name": "probabilities", "dtype": "<f8", "shape": [1 << 27, 3]}]),
     "expected <f8 [3, 3]"),
    (_result(arrays=[{"name": "OOD_scores", "dtype": "<f8", "shape": [3]}] * 2),
     "unexpected array 'OOD_scores'"),
    (_result(arrays=[{"name": "weights", "dtype": "<f8", "shape": [3]}]),
     "unexpected array 'weights'"),
    (_result(arrays=[{"name": "OOD_scores", "dtype": "<f8", "shape": [3], "offset": 0}]),
     "array 0 of a result message is declared as"),
])
def test_result_schema(header, message):
    with pytest.raises(wire.WireError) as info:
        wire.check_result(header, 1, "x", 3)
    assert message in str(info.value)


def test_maps_schema_follows_the_images_shapes():
    shapes = [(36, 64), (18, 32)]
    good = {"op": "maps", "id": 1, "nonce": "x", "error": None,
            "arrays": [{"name": "explainability", "dtype": "|u1", "shape": [9, 16]},
                       {"name": "explainability", "dtype": "|u1", "shape": [4, 8]}]}
    assert [a[2] for a in wire.check_maps(good, 1, "x", shapes)] == [(9, 16), (4, 8)]
    bad = json.loads(json.dumps(good))
    bad["arrays"][1]["shape"] = [9, 16]
    with pytest.raises(wire.WireError, match=r"expected \|u1 \[4, 8\]"):
        wire.check_maps(bad, 1, "x", shapes)
    with pytest.raises(wire.WireError, match="1 explainability maps for a batch of 2 images"):
        wire.check_maps({**good, "arrays": good["arrays"][:1]}, 1, "x", shapes)


def test_child_packs_numbers_as_arrays_and_the_rest_as_plain_values():
    fields, arrays = child.pack_output(
        {"predictions": np.array(["OK", "KO"]), "probabilities": [np.array([1, 0, 0]),
                                                                   np.array([0.5, 0.5, 0])],
         "OOD_scores": np.array([[0.1], [0.2]]), "extra": 1}, 2)
    assert fields == {"output": {"predictions": ["OK", "KO"]}, "ignored": ["extra"],
                      "maps": False}
    assert [(name, a.dtype.str, a.shape) for name, a in arrays] == \
        [("probabilities", "<f8", (2, 3)), ("OOD_scores", "<f8", (2,))]
    fields, arrays = child.pack_output({"predictions": ["OK"], "probabilities": [["a", 1, 2]]}, 1)
    assert fields["output"]["probabilities"] == [["a", 1, 2]] and arrays == []


def test_child_names_the_image_of_a_bad_map():
    shapes = [(4, 4), (4, 8)]
    ok = [np.zeros((4, 4)), np.ones((4, 8))]
    maps, problem = child.reduce_maps(ok, shapes)
    assert problem is None and [m.tolist() for m in maps] == [[[0]], [[255, 255]]]
    for maps, message in [
        ([np.zeros((4, 4)), np.zeros((8, 4))],
         "explainability of image 1 has shape (8, 4), expected (4, 8) (the image's height and width)"),
        ([np.zeros((4, 4)), np.full((4, 8), np.nan)], "explainability of image 1 contains NaN or infinity"),
        ([np.full((4, 4), 1.5), np.zeros((4, 8))],
         "explainability of image 0 has values outside [0, 1] (min 1.5, max 1.5)"),
        ([np.zeros((4, 4))], "'explainability' has 1 maps for a batch of 2 images"),
        ("map", "'explainability' must be a list of one map per image, got str"),
    ]:
        assert child.reduce_maps(maps, shapes)[1] == message


def test_one_line_flattens_what_the_child_says():
    assert wire.one_line("a\nb\x1b[31m c", 100) == "a b [31m c"
    assert len(wire.one_line("x" * 1000, 50)) == 50
