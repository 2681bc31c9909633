"""The output formats, each with the module of pitfall_lint.report that writes it: the command line lists them
without importing the reporters (`--version` and `--help` pay for no report code)."""

WRITER_MODULES = {
    "text": "text", "json": "json_format", "json-lines": "json_lines", "github": "github", "sarif": "sarif",
    "gitlab": "gitlab", "junit": "junit", "markdown": "markdown",
}
FORMATS = tuple(WRITER_MODULES)
