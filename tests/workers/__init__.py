"""Scripts the tests run as fresh Python processes, and the helper that runs them."""
