"""The JUnit XML form, for CI dashboards: one writer for every tool, and what it writes
always parses (text XML cannot hold is dropped; ElementTree escapes the rest)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from conformance.reporting.clean import clip, xml_text

#: A JUnit case's outcomes (JUnit's words, not a job's or a request's state).
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class Case:
    name: str
    classname: str
    #: :data:`PASSED`, :data:`FAILED` or :data:`SKIPPED`.
    status: str = PASSED
    message: str = ""
    text: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    out: str = ""


@dataclass
class Suite:
    name: str
    cases: list[Case]
    time_s: float = 0.0
    properties: dict[str, str] = field(default_factory=dict)


def document(suites: list[Suite]) -> str:
    root = ET.Element("testsuites")
    for s in suites:
        failures = sum(c.status == FAILED for c in s.cases)
        skipped = sum(c.status == SKIPPED for c in s.cases)
        suite = ET.SubElement(root, "testsuite", name=xml_text(s.name), tests=str(len(s.cases)),
                              failures=str(failures), skipped=str(skipped), errors="0",
                              time=f"{s.time_s:.3f}")
        if s.properties:
            props = ET.SubElement(suite, "properties")
            for k, val in s.properties.items():
                ET.SubElement(props, "property", name=xml_text(k), value=xml_text(val))
        for c in s.cases:
            case = ET.SubElement(suite, "testcase", classname=xml_text(c.classname),
                                 name=xml_text(c.name), time="0")
            if c.properties:
                ET.SubElement(case, "properties").extend(
                    [ET.Element("property", name=xml_text(k), value=xml_text(val))
                     for k, val in c.properties.items()])
            if c.status == FAILED:
                fail = ET.SubElement(case, "failure", message=xml_text(clip(c.message, 500)))
                fail.text = xml_text(c.text)
            elif c.status == SKIPPED:
                ET.SubElement(case, "skipped", message=xml_text(clip(c.message, 500)))
            if c.out:
                ET.SubElement(case, "system-out").text = xml_text(c.out)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
