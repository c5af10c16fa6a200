"""What every chapter does first (resolve parameters, print the environment) and last (save tidy results)."""
from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from IPython.display import display

from . import __version__, results
from .device import describe, pick_device
from .profiles import chapter_spec, resolve


@dataclass
class Chapter:
    name: str
    profile: str
    params: dict[str, Any]
    environment: dict[str, str]
    started: float = field(default_factory=time.perf_counter)

    def save(self, tables: Mapping[str, pd.DataFrame], seeds: Sequence[int] = ()) -> None:
        """Write the chapter's tidy tables and metadata (parameters, seeds, environment, versions, wall time).

        Returns nothing, so the call never echoes file paths onto the page."""
        meta = {"chapter": self.name, "profile": self.profile, "parameters": self.params, "seeds": list(seeds),
                **self.environment, "qkov_lib": __version__, "git_commit": results.git_commit(),
                "date": time.strftime("%Y-%m-%d"), "wall_time_s": round(time.perf_counter() - self.started, 3)}
        paths = results.save(results.results_dir(self.profile), self.name, dict(tables), meta)
        where = "" if os.environ.get(results.RESULTS_ENV) else (
            f", apart from the runner's (results/{results.INTERACTIVE}/{self.profile})")
        print(f"saved {len(paths)} result files for {self.name} ({self.profile}){where}")


def begin(name: str, profile: str = "default", overrides: Mapping[str, Any] | None = None) -> Chapter:
    """Resolve the chapter's parameters for a profile plus overrides and print device, torch version and profile."""
    concrete, params = resolve(name, profile, overrides)
    pd.set_option("display.max_colwidth", None)  # claim tables carry sentences; never cut them
    env = describe(pick_device())
    print(f"{chapter_spec(name).title} | profile: {concrete}"
          + (f" (asked: {profile})" if concrete != profile else "")
          + f"\ndevice: {env['device']} ({env['device_name']}) | torch {env['torch']} | qkov_lib {__version__}")
    display(parameter_table(params, overrides or {}))
    return Chapter(name, concrete, params, env)


def parameter_table(params: Mapping[str, Any], overrides: Mapping[str, Any]) -> pd.DataFrame:
    """The effective parameters, one row each, and where each value came from (the profile or an override)."""
    return pd.DataFrame({"value": [repr(v) for v in params.values()],
                         "set by": ["override" if k in overrides else "profile" for k in params]},
                        index=pd.Index(list(params), name="parameter"))
