"""path"""
