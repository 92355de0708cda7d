"""``code_hash_masked`` masks a graph module's calibrated operands by their
place, not by their value: a multiplier the converter moves to another
operator changes it, a multiplier that drifted in band where the TOSA says
does not (:func:`vgf_conformance.goldens.vgf_reader.mask_operands`)."""

import json
import struct
from pathlib import Path

from vgf_conformance.goldens import compliance
from vgf_conformance.goldens.projections import calibrated_operands
from vgf_conformance.goldens.vgf_reader import _hash, mask_operands

#: TOSA.001000.1's instruction numbers of the operators these modules hold.
_RESCALE, _CLAMP = 65, 10
GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "cases"


def graph_module(rescales: list[tuple[int, int]], clamp: float = 127.0) -> bytes:
    """A SPIR-V graph module as the model converter lays one out: a TOSA
    instruction set, each RESCALE's multiplier and shift as a composite of
    scalar constants, a CLAMP whose bound is a float constant, then the
    operators' ``OpExtInst`` (attributes first, the tensor operands last)."""
    words = [0x07230203, 0x00010600, 0, 1000, 0]

    def inst(opcode: int, *operands: int) -> None:
        words.extend([(len(operands) + 1) << 16 | opcode, *operands])

    name = b"TOSA.001000.1".ljust(16, b"\0")
    inst(11, 1, *struct.unpack("<4I", name))
    inst(43, 2, 3, struct.unpack("<I", struct.pack("<f", clamp))[0])
    for k, (multiplier, shift) in enumerate(rescales):
        base = 10 + 10 * k
        inst(43, 4, base, multiplier)
        inst(44, 5, base + 1, base)
        inst(43, 6, base + 2, shift)
        inst(44, 7, base + 3, base + 2)
    inst(12, 8, 100, 1, _CLAMP, 3, 3, 99)
    for k in range(len(rescales)):
        inst(12, 8, 101 + k, 1, _RESCALE, 9, 9, 9, 9, 9, 100 + k, 11 + 10 * k, 13 + 10 * k, 9, 9)
    return struct.pack(f"<{len(words)}I", *words)


def tosa_ops(rescales: list[tuple[int, int]]) -> list[dict]:
    """The TOSA summary's operators of the same graph."""
    roles = ["input", "multiplier", "shift", "input_zp", "output_zp"]
    return [{"op": "CLAMP", "attrs": {"min_val": -127.0, "max_val": 127.0}, "operand_roles": ["input"]}] + [
        {"op": "RESCALE", "attrs": {"multiplier": [m], "shift": [s], "input_zp": 0}, "operand_roles": roles}
        for m, s in rescales]


def golden(rescales: list[tuple[int, int]], code: bytes) -> dict:
    """The tosa and vgf sections of a golden of that graph."""
    lines = ["op[0] CLAMP(min_val=-127.0 max_val=127.0) INT32[1] -> INT32[1] <- graph_input[0]"] + [
        f"op[{k + 1}] RESCALE(multiplier=[{m}] shift=[{s}] input_zp=0) INT32[1] -> INT8[1] <- op[{k}].out[0]"
        for k, (m, s) in enumerate(rescales)]
    masked = mask_operands(code, calibrated_operands(tosa_ops(rescales)))
    return {"tosa": [{"delegate": 0, "ops": lines}],
            "vgf": [{"delegate": 0, "segments": [{"code_hash": _hash(code), "code_hash_masked": _hash(masked)}]}]}


STORED = [(1283457024, 38), (2081789397, 25)]
#: Both multipliers one code up: a relative drift of 5e-10, inside the band.
DRIFTED = [(1283457025, 38), (2081789398, 25)]


def test_a_multiplier_drifted_where_the_tosa_says_is_masked():
    stored = golden(STORED, graph_module(STORED))
    new = golden(DRIFTED, graph_module(DRIFTED))
    assert new["vgf"][0]["segments"][0]["code_hash"] != stored["vgf"][0]["segments"][0]["code_hash"]
    verdict = compliance.compare(stored, new)
    assert verdict.matches, verdict.messages()


def test_swapped_multipliers_fail_the_vgf_check_on_a_drifted_tosa():
    stored = golden(STORED, graph_module(STORED))
    # The TOSA drifted in band; the converter put each multiplier on the other RESCALE.
    swapped = [(DRIFTED[1][0], DRIFTED[0][1]), (DRIFTED[0][0], DRIFTED[1][1])]
    new = golden(DRIFTED, graph_module(swapped))
    verdict = compliance.compare(stored, new)
    assert [f.path for f in verdict.findings] == ["vgf[0].segments[0].code_hash",
                                                  "vgf[0].segments[0].code_hash_masked"]


def test_a_value_equal_to_a_multiplier_elsewhere_is_not_masked():
    # The clamp bound's bits are those of a multiplier: masking by value
    # would hide a change of it; by place it stays in the code.
    bits = struct.unpack("<I", struct.pack("<f", 127.0))[0]
    rescales = [(bits, 30)]
    code = graph_module(rescales)
    masked = mask_operands(code, calibrated_operands(tosa_ops(rescales)))
    assert masked.count(struct.pack("<I", bits)) == code.count(struct.pack("<I", bits)) - 1


def test_operators_the_converter_folded_away_leave_their_kind_unmasked():
    # The flatbuffer has a third RESCALE that the code does not: which
    # instruction is which is no longer known, so none is masked.
    code = graph_module(STORED)
    assert mask_operands(code, calibrated_operands(tosa_ops(STORED + [(1 << 30, 31)]))) == code
    assert mask_operands(code, calibrated_operands(tosa_ops(STORED))) != code


def test_every_graph_with_a_rescale_has_its_code_masked():
    # The place of each operand is found in every graph module the converter made.
    unmasked = []
    for path in sorted(GOLDEN.glob("*.json")):
        case = json.loads(path.read_text())
        vgf = {v.get("delegate"): v for v in case.get("vgf") or [] if isinstance(v, dict)}
        for tosa in case.get("tosa") or []:
            if isinstance(tosa, dict) and any(" RESCALE(" in line for line in tosa.get("ops", [])):
                graphs = [s for s in vgf.get(tosa["delegate"], {}).get("segments", []) if s.get("module") == "GRAPH"]
                unmasked += [f"{path.stem} delegate {tosa['delegate']}" for s in graphs if "code_hash_masked" not in s]
    assert not unmasked


def test_integer_calibrated_operands_and_float_constants_are_masked_as_their_words():
    roles = ["input", "weight", "bias", "input_zp", "weight_zp"]
    ops = [{"op": "CONV2D", "attrs": {"bias": [0.25, -1.5]}, "operand_roles": roles},
           {"op": "CONV2D", "attrs": {"bias": [12, -7], "input_zp": -3}, "operand_roles": roles},
           {"op": "MUL", "attrs": {"input2": [0.00993198], "shift": [0]}, "operand_roles": ["input1", "input2", "shift"]}]
    assert [(o.kind, o.ordinal, o.from_end, o.values) for o in calibrated_operands(ops)] == [
        ("CONV2D", 0, 3, (0x3E800000, 0xBFC00000)),  # a float graph's bias: its float32 bits
        ("CONV2D", 1, 3, (12, -7)),
        ("MUL", 0, 2, (struct.unpack("<I", struct.pack("<f", 0.00993198))[0],))]  # not the int shift
