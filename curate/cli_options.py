"""`curate dedup`'s options made from the config models: one place to add a config key.

Each field of a config section becomes a click option (:func:`config_options`); the flags given
become the config's nested overrides (:func:`overrides`). Help shows every default one way
(:func:`default_help`).
"""

import types
import typing

import click
from pydantic import BaseModel


def field_default(model, field: str) -> str:
    """A config field's default as help shows it, taken from the model so both always agree."""
    value = model.model_fields[field].default
    return {True: "on", False: "off", None: "none"}.get(value, value) if isinstance(value, bool | None) else str(value)


def default_help(text) -> str:
    """The one way help shows a default."""
    return f"[default: {text}]"


SECTIONS: dict[str, tuple[str, ...]] = {}  # option name -> its config section, filled by config_options


def config_options(model: type[BaseModel], section: tuple[str, ...] = ()):
    """Decorator adding a click option for each field of a config section (nested sections left out).

    The option is ``--field-name`` (``--name/--no-name`` for a bool), its help the field's
    description and default, its choices the field's ``Literal`` values; the field's
    ``json_schema_extra["cli"]`` may name another ``flag``, other ``choices``, a ``metavar``, and
    the ``default`` as help writes it (None: none). Every option is None unless given, so the
    config file or the model's default decides; :func:`overrides` nests the given ones under
    ``section``. A new config key is thus a new option, with nothing to add here.
    """

    def decorate(command):
        for name, field in reversed(model.model_fields.items()):
            kind = _without_none(field.annotation)
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                continue
            if field.description is None:
                raise TypeError(f"{model.__name__}.{name} has no description: `curate dedup --help` shows it")
            cli = (field.json_schema_extra or {}).get("cli", {})
            shown = cli["default"] if "default" in cli else field_default(model, name)
            settings = {
                "help": field.description + (f" {default_help(shown)}" if shown is not None else ""),
                "metavar": cli.get("metavar"),
            }
            flag = cli.get("flag", "--" + name.replace("_", "-"))
            if kind is bool:
                flag = flag if "/" in flag else f"{flag}/--no-{flag[2:]}"
                settings["default"] = None
            elif typing.get_origin(kind) is typing.Literal:
                values = {
                    str(v): v for v in typing.get_args(kind)
                }  # hash_bits: "32" on the command line, 32 in the config
                settings["type"] = click.Choice(cli.get("choices", list(values)))
                settings["callback"] = lambda ctx, param, given, values=values: values.get(given, given)
            else:
                settings["type"] = kind if kind in (int, float) else str
            SECTIONS[name] = section
            command = click.option(flag, name, **settings)(command)
        return command

    return decorate


def _without_none(annotation):
    """``X`` of ``X | None``; other annotations as they are (a union of several types is read as text)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [k for k in typing.get_args(annotation) if k is not type(None)]
        return kinds[0] if len(kinds) == 1 else str
    return annotation


def overrides(flags: dict) -> dict:
    """The config's nested overrides from the dedup flags (None: not given)."""
    nested: dict = {}
    for name, value in flags.items():
        section = nested
        for key in SECTIONS[name]:
            section = section.setdefault(key, {})
        section[name] = value
    return nested
