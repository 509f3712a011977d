"""A question's form, one widget per field of its requestedSchema.

Which widget a field gets follows the schema's kinds (broker/schema.py): text and numbers are typed,
a boolean is a checkbox (or yes/no/unset when it has no default), a single choice is a select, a
multi-select is a list to tick. Defaults are filled in; credentials are password inputs. What the
person entered is typed by the schema here and checked by the daemon's own rules before it is sent.
The server's words (titles, descriptions, choices) are shown as plain text, never as markup.
"""

from __future__ import annotations

from typing import Any, Literal

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Select, SelectionList, Static
from textual.widgets.select import NoSelection

from mcpx.broker.schema import Field, FlatSchema, same
from mcpx.presentation.text import plain

MISSING: Any = object()  # a field left empty: not sent, so the daemon fills its default or says it is required

FORMAT_HINTS = {"email": "name@example.com", "uri": "https://…", "date": "YYYY-MM-DD",
                "date-time": "YYYY-MM-DDTHH:MM:SSZ"}


class FieldBox(Vertical):
    """One field: what it is (in the server's words, quoted as text), its input, and its problem."""

    DEFAULT_CSS = """
    FieldBox { height: auto; margin-bottom: 1; }
    FieldBox .field-label { color: $text; }
    FieldBox .field-problem { color: $error; text-style: bold; display: none; }
    FieldBox.-invalid .field-problem { display: block; }
    """

    def __init__(self, index: int, field: Field, secret: bool) -> None:
        super().__init__(id=f"field-{index}")  # property names may hold anything; ids may not
        self.field = field
        self.field_name = field.name
        self.secret = secret

    def compose(self) -> ComposeResult:
        label = plain(self.field.describe(), 400)
        yield Static(Content.assemble((self.field_name, "bold"), Content(label[len(self.field_name):])),
                     classes="field-label")
        yield self._input()
        yield Static("", classes="field-problem")

    def _input(self) -> Widget:
        f = self.field
        default = f.default if f.has_default else None
        if f.kind == "multi-enum":
            chosen = default if isinstance(default, list) else []
            return SelectionList[int](*[(Content(plain(title, 200)), i, value in chosen)
                                        for i, (value, title) in enumerate(f.options)], classes="value")
        if f.kind == "enum":
            picked = next((i for i, (v, _) in enumerate(f.options) if f.has_default and same(v, default)), Select.NULL)
            return Select[int]([(Content(plain(title, 200)), i) for i, (_v, title) in enumerate(f.options)],
                               value=picked, allow_blank=picked is Select.NULL, prompt="(choose)", classes="value")
        if f.kind == "boolean":
            if isinstance(default, bool):
                return Checkbox(Content(plain(f.title or f.name, 200)), default, classes="value")
            # no default: unset stays possible, so an untouched field is not sent as a false the person never chose
            return Select[bool]([(Content("yes"), True), (Content("no"), False)], prompt="(unset)", classes="value")
        text = "" if not f.has_default or isinstance(default, bool) else str(default)
        input_type: Literal["integer", "number", "text"] = (
            "integer" if f.kind == "integer" else "number" if f.kind == "number" else "text")
        hint = FORMAT_HINTS.get(f.format or "", "")
        return Input(text, placeholder=hint, password=self.secret, type=input_type, classes="value")

    @property
    def control(self) -> Widget:
        return self.query_one(".value")

    def value(self) -> Any:
        """What the person entered, typed by the schema; MISSING when they left it empty."""
        control = self.control
        if isinstance(control, SelectionList):
            picked = sorted(control.selected)
            if not picked and not self.field.required:
                return MISSING
            return [self.field.options[i][0] for i in picked]
        if isinstance(control, Select):
            if isinstance(control.value, NoSelection):  # Select.NULL, the one NoSelection
                return MISSING
            return control.value if self.field.kind == "boolean" else self.field.options[control.value][0]
        if isinstance(control, Checkbox):
            return control.value
        assert isinstance(control, Input)
        if control.value == "":
            return MISSING
        return self.field.parse(control.value)

    def show_problem(self, problem: str | None) -> None:
        self.set_class(problem is not None, "-invalid")
        self.query_one(".field-problem", Static).update(Content(f"✗ {self.field_name} {plain(problem or '', 400)}"))


class Form(Vertical):
    """Every field of a question, and the problems that are not any one field's."""

    DEFAULT_CSS = """
    Form { height: auto; }
    Form #form-problem { color: $error; text-style: bold; }
    """

    def __init__(self, schema: dict[str, Any] | None, secret_fields: list[str]) -> None:
        super().__init__(id="form")
        self.schema = FlatSchema.of(schema)
        self.boxes = [FieldBox(i, f, f.name in secret_fields or f.format == "password")
                      for i, f in enumerate(self.schema.fields)]

    def compose(self) -> ComposeResult:
        if not self.boxes:
            yield Static("(no fields: accept, decline or cancel)")
        yield from self.boxes
        yield Static("", id="form-problem")

    def content(self) -> dict[str, Any]:
        return {box.field_name: v for box in self.boxes if (v := box.value()) is not MISSING}

    def check(self) -> dict[str, Any] | None:
        """The content if it fits the schema by the daemon's own rules; else None, each problem shown."""
        content = self.content()
        _filled, problems = self.schema.check_content(content)
        self.show_problems(problems)
        return None if problems else content

    @on(Input.Changed)
    @on(Select.Changed)
    @on(SelectionList.SelectedChanged)
    @on(Checkbox.Changed)
    def _recheck(self) -> None:
        """The problems shown are checked again as the person changes the form, by the same rules: a value given
        after "is required" clears it, one that still does not fit says why now. No new problem is shown on a field
        the person has not been told about yet."""
        shown = [box for box in self.boxes if box.has_class("-invalid")]
        if shown:
            _filled, problems = self.schema.check_content(self.content())
            for box in shown:
                box.show_problem(problems.get(box.field_name))

    def show_problems(self, problems: dict[str, str], message: str | None = None) -> None:
        """Problems per field (ours, or the daemon's from a 422); any other is shown under the form."""
        for box in self.boxes:
            box.show_problem(problems.get(box.field_name))
        rest = [f"{plain(k, 80)}: {plain(v, 400)}" for k, v in problems.items()
                if k not in {b.field_name for b in self.boxes}]
        if message and not problems:
            rest.append(plain(message, 400))
        self.query_one("#form-problem", Static).update(Content("\n".join(rest)))
        for box in self.boxes:
            if box.field_name in problems:
                box.control.focus()
                break

