"""The benchmark families (issue 30 moves each family here)."""
