#!/usr/bin/env python3
"""Renders the repository's Markdown pages to HTML for the documentation site.

Usage: render.py SOURCE_ROOT OUTPUT_ROOT FILE.md [FILE.md ...]

Each FILE (relative to SOURCE_ROOT) becomes OUTPUT_ROOT/FILE with .html instead of .md. Links to
other .md files become links to their .html pages; links to module documentation written as
DocC symbol links are left as code. Handles the Markdown the project writes: headings,
paragraphs, fenced code, tables, lists, block quotes, images, links, code, bold and emphasis.
Raw HTML comments (the docs-gen markers) are dropped; SVG pictures and linked .html pages (the
run players) are copied beside the page.
"""
import html
import os
import re
import shutil
import sys

STYLE = """
body { font: 16px/1.55 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial,
       sans-serif; max-width: 880px; margin: 2rem auto; padding: 0 1rem; color: #1d1d1f; }
pre { background: #f5f5f7; padding: .8rem 1rem; overflow-x: auto; border-radius: 6px; }
code { font: 14px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { border: 1px solid #d2d2d7; padding: .3rem .6rem; vertical-align: top; }
nav { font-size: 14px; margin-bottom: 1.5rem; }
img { max-width: 100%; }
blockquote { border-left: 4px solid #d2d2d7; margin: 0; padding-left: 1rem; color: #515154; }
"""


def inline(text):
    """Inline Markdown to HTML.

    Links and images first (their text may hold code spans), then code spans, so nothing
    inside a code span is touched, then emphasis.
    """
    links = []

    def hold(match):
        image, label, url = match.group(1), match.group(2), match.group(3)
        if image:
            html_text = '<img alt="%s" src="%s">' % (html.escape(label), link_target(url))
        else:
            html_text = '<a href="%s">%s</a>' % (link_target(url), inline(label))
        links.append(html_text)
        return "\x00%d\x00" % (len(links) - 1)

    text = re.sub(r"(!?)\[((?:[^\[\]]|`[^`]*`)+)\]\(([^)\s]+)\)", hold, text)
    rendered = code_spans(text)
    return re.sub(r"\x00(\d+)\x00", lambda m: links[int(m.group(1))], rendered)


def code_spans(text):
    parts = re.split(r"(`+)(.+?)\1", text)
    out = []
    i = 0
    while i < len(parts):
        if i + 2 < len(parts) and parts[i + 1] and parts[i + 1].startswith("`"):
            out.append(spans(parts[i]))
            out.append("<code>" + html.escape(parts[i + 2]) + "</code>")
            i += 3
        else:
            out.append(spans(parts[i]))
            i += 1
    return "".join(out)


def link_target(url):
    if re.match(r"^[a-z]+:", url) or url.startswith("#"):
        return url
    path, _, anchor = url.partition("#")
    if path.endswith(".md"):
        path = path[:-3] + ".html"
    return path + ("#" + anchor if anchor else "")


def spans(text):
    text = html.escape(text, quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", text)
    return text


def cells(row):
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|"):
        row = row[:-1]
    # A `\|` inside a cell is a literal bar.
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def render(markdown):
    markdown = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    # An example's front matter (title, summary, lesson, modules) is for tools, not readers.
    markdown = re.sub(r"\A---\n.*?\n---\n", "", markdown, flags=re.S)
    lines = markdown.split("\n")
    out = []
    title = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            lang = line[3:].strip()
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1
            cls = ' class="language-%s"' % lang if lang else ""
            out.append("<pre><code%s>%s</code></pre>" % (cls, html.escape("\n".join(body))))
            continue
        heading = re.match(r"^(#{1,6})\s+(.*)$", line)
        if heading:
            level = len(heading.group(1))
            text = heading.group(2).strip()
            if title is None:
                title = re.sub(r"[`*]", "", text)
            anchor = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
            out.append('<h%d id="%s">%s</h%d>' % (level, anchor, inline(text), level))
            i += 1
            continue
        if line.strip().startswith("|") and i + 1 < len(lines) and re.match(
            r"^\s*\|?[\s:|-]+\|[\s:|-]*$", lines[i + 1]
        ):
            head = cells(line)
            i += 2
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            out.append("<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (
                "".join("<th>%s</th>" % inline(c) for c in head),
                "".join(
                    "<tr>%s</tr>" % "".join("<td>%s</td>" % inline(c) for c in row)
                    for row in rows
                ),
            ))
            continue
        item = re.match(r"^(\s*)([-*]|\d+\.)\s+(.*)$", line)
        if item:
            ordered = item.group(2)[0].isdigit()
            items = []
            while i < len(lines):
                m = re.match(r"^(\s*)([-*]|\d+\.)\s+(.*)$", lines[i])
                if m:
                    items.append(m.group(3))
                elif lines[i].startswith("  ") and lines[i].strip() and items:
                    items[-1] += " " + lines[i].strip()
                else:
                    break
                i += 1
            tag = "ol" if ordered else "ul"
            out.append("<%s>%s</%s>" % (tag, "".join("<li>%s</li>" % inline(t) for t in items), tag))
            continue
        if line.startswith(">"):
            quote = []
            while i < len(lines) and lines[i].startswith(">"):
                quote.append(lines[i][1:].strip())
                i += 1
            out.append("<blockquote><p>%s</p></blockquote>" % inline(" ".join(quote)))
            continue
        if not line.strip():
            i += 1
            continue
        paragraph = []
        while i < len(lines) and lines[i].strip() and not re.match(
            r"^(#{1,6}\s|```|\s*[-*]\s|\s*\d+\.\s|>|\s*\|)", lines[i]
        ):
            paragraph.append(lines[i].strip())
            i += 1
        if not paragraph:  # a line no rule above took: keep it as text
            paragraph.append(lines[i].strip())
            i += 1
        out.append("<p>%s</p>" % inline(" ".join(paragraph)))
    return title or "Orderly", "\n".join(out)


def page(title, body, home):
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>%s · Orderly</title><style>%s</style></head><body>"
        '<nav><a href="%s">Orderly documentation</a></nav>\n%s\n</body></html>\n'
        % (html.escape(title), STYLE, home, body)
    )


def main():
    source, output, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    for name in files:
        with open(os.path.join(source, name), encoding="utf-8") as f:
            title, body = render(f.read())
        target = os.path.join(output, name[:-3] + ".html")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        depth = name.count("/")
        home = "../" * depth + "index.html"
        with open(target, "w", encoding="utf-8") as f:
            f.write(page(title, body, home))
        # Pictures the page shows, and the run players it links to (pages of their own, made by
        # docs-gen), kept beside it.
        folder = os.path.dirname(os.path.join(source, name))
        text = open(os.path.join(source, name)).read()
        shown = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
        players = re.findall(r"\]\(([^)\s]+\.html)\)", text)
        for picture in shown + players:
            if re.match(r"^[a-z]+:", picture):
                continue
            src = os.path.normpath(os.path.join(folder, picture))
            dst = os.path.normpath(os.path.join(os.path.dirname(target), picture))
            if os.path.isfile(src):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                if src.endswith(".html"):
                    # A player links back to its lesson's Markdown page, which the site serves
                    # as HTML.
                    with open(src, encoding="utf-8") as f:
                        player = f.read()
                    player = re.sub(
                        r'href="([^":#]+)\.md(#[^"]*)?"',
                        lambda m: 'href="%s.html%s"' % (m.group(1), m.group(2) or ""),
                        player,
                    )
                    with open(dst, "w", encoding="utf-8") as f:
                        f.write(player)
                else:
                    shutil.copyfile(src, dst)
                # A player's script and style sheet, shared by the players of its folder.
                if src.endswith(".html"):
                    with open(src, encoding="utf-8") as f:
                        for shared in re.findall(r'(?:src|href)="([^":]+\.(?:js|css))"', f.read()):
                            source_file = os.path.join(os.path.dirname(src), shared)
                            if os.path.isfile(source_file):
                                shutil.copyfile(source_file, os.path.join(os.path.dirname(dst), shared))


if __name__ == "__main__":
    main()
