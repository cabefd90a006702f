"""SGLang's real RadixCache behind the PrefixCache interface (``adapter``), and ``make engines``' runner (``engines``)."""
