"""Tiny chapters (jupytext MyST sources) for the runner's tests: one that saves a table and a claim, one that fails."""

HEAD = """---
kernelspec: {display_name: Python 3, language: python, name: python3}
jupytext: {text_representation: {extension: .md, format_name: myst}}
---
# A chapter for the tests

```{code-cell} ipython3
:tags: [parameters]

profile = "default"
overrides = {}
```
"""
TINY = HEAD + """
```{code-cell} ipython3
import pandas as pd
from qkov_lib import results
x = overrides.get("x", 1)
claims = pd.DataFrame([{"claim": "x is positive", "this run": str(x), "reproduced": x > 0}])
results.save(results.results_dir(profile), "tiny", {"main": pd.DataFrame({"x": [x]}), "claims": claims},
             {"profile": profile, "parameters": {"x": x}})
```
"""
BROKEN = HEAD + """
```{code-cell} ipython3
raise ValueError("deliberate failure")
```
"""
