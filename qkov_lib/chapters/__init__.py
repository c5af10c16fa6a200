"""The chapters, one module each: a frozen ``Setup`` whose defaults are the paper's values, ``PROFILES`` (what each
other profile changes), and the chapter's ``run``, ``claims`` and figures. A notebook ``notebooks/<name>.md`` calls
its module; the runner finds the modules through the table of contents (``contents``). Nothing below imports a
chapter."""
