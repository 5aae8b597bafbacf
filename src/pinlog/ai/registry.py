"""One registry per kind of pluggable model part: embedding providers and judges (SPEC §8, §9).

Each member is a frozen pydantic model that describes itself — its name (the discriminator
field, a ``Literal``), its fields with their defaults, and how to build the running object — and
the members of a kind form a discriminated union on that name, as pgai's vectorizer config does.
:meth:`Registry.config` turns the flat ``PINLOG_*`` settings into one member: the member's
``settings_values`` picks the settings it reads (typed attribute access; ``None`` = unset, so the
model's default applies) and the union validates them. An unknown name is one line listing the
known ones (:class:`pinlog.settings.SettingsError`, exit 2 through the CLI).

Adding a member = one module with its model + one entry in the registry's tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Generic, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from pinlog.settings import Settings, SettingsError


class Member(BaseModel):
    """Base of a registry member: frozen, no unknown fields (a typo is an error, not ignored).

    Subclasses declare the discriminator field (``provider: Literal["openai"] = "openai"``)
    and override :meth:`settings_values`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    #: A field ``x`` is the setting ``{settings_prefix}X`` (named in error messages).
    settings_prefix: ClassVar[str] = "PINLOG_"

    @classmethod
    def settings_values(cls, settings: Settings) -> dict[str, Any]:
        """The model's field values read from ``settings``; a ``None`` value is left out (the
        field's default applies)."""
        return {}


def given(**values: Any) -> dict[str, Any]:
    """``values`` without the ``None`` ones (unset settings: the model's default applies)."""
    return {name: value for name, value in values.items() if value is not None}


M = TypeVar("M", bound=Member)


class Registry(Generic[M]):
    """The members of one kind, by name.

    Args:
        kind: what a member is, for messages (``embedding provider``).
        setting: the ``PINLOG_*`` variable that names the member.
        discriminator: the field holding the name in every member.
        members: the member classes; each one's discriminator default is its name.
    """

    def __init__(self, kind: str, setting: str, discriminator: str,
                 members: Sequence[type[M]]) -> None:
        self.kind, self.setting, self.discriminator = kind, setting, discriminator
        self.members: dict[str, type[M]] = {}
        for member in members:
            name = member.model_fields[discriminator].default
            if not isinstance(name, str) or name in self.members:
                raise ValueError(f"{member.__name__}: its {discriminator} must be a unique name")
            self.members[name] = member
        union: Any = Union[tuple(self.members.values())]  # noqa: UP007 - built at run time
        self.adapter: TypeAdapter[M] = TypeAdapter(
            Annotated[union, Field(discriminator=discriminator)])

    @property
    def names(self) -> tuple[str, ...]:
        """The known names, sorted."""
        return tuple(sorted(self.members))

    def config(self, name: str, settings: Settings, *, prefix: str | None = None) -> M:
        """The member called ``name``, its fields read from ``settings``.

        Args:
            prefix: how the variables are named in messages when ``settings`` is a view whose
                values came from other variables (``PINLOG_NEXT_EMBEDDING_``: the next
                profile's provider, SPEC §9.1); default the member's ``settings_prefix``.

        Raises:
            SettingsError: an unknown name (one line listing the known ones), or a value its
                model refuses (one line per field, naming the ``PINLOG_*`` variable).
        """
        setting = self.setting if prefix is None else \
            prefix + self.setting.rsplit("_", 1)[-1]
        member = self.members.get(name)
        if member is None:
            raise SettingsError(f"invalid setting {setting}: unknown {self.kind} {name!r} "
                                f"(known: {', '.join(self.names)})")
        values = {self.discriminator: name, **member.settings_values(settings)}
        try:
            return self.adapter.validate_python(values)
        except ValidationError as exc:
            lines = []
            for error in exc.errors():
                field = str(error["loc"][1]) if len(error["loc"]) > 1 else ""
                variable = (prefix or member.settings_prefix) + field.upper()
                lines.append(f"invalid setting {variable}: {error['msg']} "
                             f"({setting}={name})")
            raise SettingsError("\n".join(lines)) from None
