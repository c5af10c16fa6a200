"""The settings box under a chapter's title: the settings that differ from the defaults first, each beside its
default, and a label that counts them."""

import dataclasses
import re

from qkov_lib.chapters import sva
from qkov_lib.core.chapter import Chapter
from qkov_lib.present.settings import settings_box
from qkov_lib.runner.catalog import resolve

ENV = {"device": "cpu", "device_name": "a CPU", "torch": "2"}


def test_an_override_is_listed_first_beside_its_default_and_counted_in_the_label():
    setup = dataclasses.replace(resolve("sva", "default")[1], seeds=(7,))
    box = settings_box(Chapter("sva", "default", setup, ENV), sva.Setup)
    n = len(dataclasses.fields(sva.Setup))
    assert f"1 of {n} settings differ from the defaults the text describes" in box
    shown = box.split("<details><summary>All")[0]
    assert re.findall(r"<td><code>(\w+)</code></td><td>([^<]*)</td><td>([^<]*)</td>", shown) == [
        ("seeds", "[7]", repr(list(sva.Setup().seeds)))
    ]


def test_a_run_with_every_default_says_so():
    box = settings_box(Chapter("sva", "default", sva.Setup(), ENV), sva.Setup)
    assert "Every setting is the default." in box and "0 of " in box
