"""What each subset's corpus holds, as a router reads it (the semantic router embeds it, the LLM router is shown
it). A run config's `routing.descriptions` replaces any of them."""

from __future__ import annotations

DESCRIPTIONS: dict[str, str] = {
    "FinQA": (
        "Pages of annual earnings reports (10-K filings) of S&P 500 companies in the United States, 1999 to 2019: "
        "a page's text and one table of figures in US dollars, such as revenue, operating expenses, share-based "
        "compensation, contractual obligations, cash flows and stock performance; questions ask for a calculation "
        "over a company's figures of a year."
    ),
    "ConvFinQA": (
        "The same S&P 500 earnings report pages as FinQA, 1999 to 2019, asked as a conversation: follow-up "
        "questions about a company's table and text that build a calculation step by step."
    ),
    "TAT-DQA": (
        "Pages of annual reports of companies from many countries, 2018 to 2020, often outside the United States "
        "(figures in pounds, euros, rand or dollars; fiscal years such as FY19): text with tables of financial "
        "statements and notes, such as segment results, tax, leases, employee benefits and share options."
    ),
}


def descriptions_of(subsets: list[str], overrides: dict[str, str]) -> dict[str, str]:
    """The description of each loaded subset: the config's, else the packaged one, else the subset's name."""
    return {s: overrides.get(s) or DESCRIPTIONS.get(s) or f"the {s} corpus" for s in subsets}
