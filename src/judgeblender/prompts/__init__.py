"""The prompt library: published judge prompts as data files, plus users' own."""

from .library import get_template, license_text, list_templates, template_paths
from .template import PromptTemplate, Step, load_template, render_text

__all__ = [
    "PromptTemplate", "Step", "get_template", "license_text", "list_templates", "load_template",
    "render_text", "template_paths",
]
